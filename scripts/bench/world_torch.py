"""YOLO-World v2 (ultralytics' `yolov8{s,m,l,x}-worldv2`) in plain PyTorch, for the GPU peers' benchmark
(scripts/bench/gpu.py), which runs where ultralytics is not installed. Written from the architecture as
../shared/reference/model-facts.md section C describes it, with ultralytics' parameter names, so that a state
dict of either loads into the other; scripts/bench/check_world_torch.py checks its output against ultralytics'.

Network only, as the peers are timed: letterboxed pixels in, (B, 4 + K, anchors) out (boxes as centre and size in
input pixels, sigmoid scores), BatchNorm folded into the convolutions as ultralytics' `fuse()` does
(`WorldNetwork.fuse()`), the contrastive head's BatchNorm kept.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

SCALES = {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768), "l": (1.00, 1.00, 512),
          "x": (1.00, 1.25, 512)}


def divisible(x, d=8):
    return int(math.ceil(x / d) * d)


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = act

    def forward(self, x):
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        return F.silu(x) if self.act else x

    def fuse(self):
        w, bn = self.conv.weight, self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        conv = nn.Conv2d(self.conv.in_channels, self.conv.out_channels, self.conv.kernel_size, self.conv.stride,
                         self.conv.padding, bias=True)
        conv.weight.data = w * scale[:, None, None, None]
        conv.bias.data = bn.bias - bn.running_mean * scale
        self.conv, self.bn = conv, None


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1, c2, n, shortcut):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c)
        self.cv2 = Conv((2 + n) * self.c, c2)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class MaxSigmoidAttn(nn.Module):
    def __init__(self, c, nh, gc=512):
        super().__init__()
        self.nh, self.hc = nh, c // nh
        self.gl = nn.Linear(gc, c)
        self.bias = nn.Parameter(torch.zeros(nh))
        self.proj_conv = Conv(c, c, 3, act=False)

    def forward(self, x, guide):
        b, _, h, w = x.shape
        g = self.gl(guide).view(b, -1, self.nh, self.hc)
        e = x.view(b, self.nh, self.hc, h, w)
        aw = torch.einsum("bmchw,bnmc->bmhwn", e, g).max(dim=-1)[0]
        aw = (aw / self.hc**0.5 + self.bias[None, :, None, None]).sigmoid()
        p = self.proj_conv(x).view(b, self.nh, -1, h, w)
        return (p * aw.unsqueeze(2)).view(b, -1, h, w)


class C2fAttn(nn.Module):
    def __init__(self, c1, c2, n, nh):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c)
        self.cv2 = Conv((3 + n) * self.c, c2)
        self.m = nn.ModuleList(Bottleneck(self.c, False) for _ in range(n))
        self.attn = MaxSigmoidAttn(self.c, nh)

    def forward(self, x, guide):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        y.append(self.attn(y[-1], guide))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.cv1, self.cv2 = Conv(c1, c1 // 2), Conv(c1 // 2 * 4, c2)

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(F.max_pool2d(y[-1], 5, 1, 2))
        return self.cv2(torch.cat(y, 1))


class BNContrastiveHead(nn.Module):
    def __init__(self, embed=512):
        super().__init__()
        self.norm = nn.BatchNorm2d(embed, eps=1e-3, momentum=0.03)
        self.bias = nn.Parameter(torch.tensor([-10.0]))
        self.logit_scale = nn.Parameter(-1.0 * torch.ones([]))

    def forward(self, x, w):
        x = self.norm(x)
        w = F.normalize(w, dim=-1, p=2)
        return torch.einsum("bchw,bkc->bkhw", x, w) * self.logit_scale.exp() + self.bias


class DFL(nn.Module):
    def __init__(self, bins=16):
        super().__init__()
        self.conv = nn.Conv2d(bins, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(bins, dtype=torch.float).view(1, bins, 1, 1)
        self.bins = bins

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.bins, a).transpose(2, 1).softmax(1)).view(b, 4, a)


class WorldDetect(nn.Module):
    def __init__(self, ch, embed=512, nc=80):
        super().__init__()
        c2, c3 = max(16, ch[0] // 4, 64), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 64, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, embed, 1)) for x in ch)
        self.cv4 = nn.ModuleList(BNContrastiveHead(embed) for _ in ch)
        self.dfl = DFL(16)
        self.strides = (8, 16, 32)

    def forward(self, xs, text):
        boxes, scores, anchors, strides = [], [], [], []
        for i, x in enumerate(xs):
            b, _, h, w = x.shape
            boxes.append(self.cv2[i](x).view(b, 64, -1))
            scores.append(self.cv4[i](self.cv3[i](x), text).view(b, text.shape[1], -1))
            ys, xs_ = torch.meshgrid(torch.arange(h, device=x.device, dtype=x.dtype) + 0.5,
                                     torch.arange(w, device=x.device, dtype=x.dtype) + 0.5, indexing="ij")
            anchors.append(torch.stack((xs_, ys), 0).view(2, -1))
            strides.append(torch.full((1, h * w), self.strides[i], device=x.device, dtype=x.dtype))
        box, score = torch.cat(boxes, 2), torch.cat(scores, 2)
        anchor, stride = torch.cat(anchors, 1).unsqueeze(0), torch.cat(strides, 1).unsqueeze(0)
        lt, rb = self.dfl(box).chunk(2, 1)
        x1y1, x2y2 = anchor - lt, anchor + rb
        dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        return torch.cat((dbox, score.sigmoid()), 1)


class WorldNetwork(nn.Module):
    """`model.N` as in ultralytics' WorldModel (the layer numbers of its YAML)."""

    def __init__(self, scale="s"):
        super().__init__()
        depth, width, maximum = SCALES[scale]

        def ch(c):
            return divisible(min(c, maximum) * width)

        def n(r):
            return max(round(r * depth), 1) if r > 1 else r

        def heads(h):
            return int(max(round(min(h, maximum // 2 // 32)) * width, 1))

        c = [ch(v) for v in (64, 128, 256, 512, 1024)]
        layers = [
            Conv(3, c[0], 3, 2), Conv(c[0], c[1], 3, 2), C2f(c[1], c[1], n(3), True),
            Conv(c[1], c[2], 3, 2), C2f(c[2], c[2], n(6), True), Conv(c[2], c[3], 3, 2),
            C2f(c[3], c[3], n(6), True), Conv(c[3], c[4], 3, 2), C2f(c[4], c[4], n(3), True), SPPF(c[4], c[4]),
            nn.Identity(), nn.Identity(),
            C2fAttn(c[4] + c[3], ch(512), n(3), heads(8)),
            nn.Identity(), nn.Identity(),
            C2fAttn(ch(512) + c[2], ch(256), n(3), heads(4)),
            Conv(ch(256), ch(256), 3, 2), nn.Identity(),
            C2fAttn(ch(256) + ch(512), ch(512), n(3), heads(8)),
            Conv(ch(512), ch(512), 3, 2), nn.Identity(),
            C2fAttn(ch(512) + c[4], ch(1024), n(3), heads(16)),
            WorldDetect((ch(256), ch(512), ch(1024))),
        ]
        self.model = nn.ModuleList(layers)

    def forward(self, x, text):
        m = self.model
        y = {}
        for i in range(10):
            x = m[i](x)
            y[i] = x
        up = F.interpolate
        p12 = m[12](torch.cat((up(y[9], scale_factor=2.0, mode="nearest"), y[6]), 1), text)
        p15 = m[15](torch.cat((up(p12, scale_factor=2.0, mode="nearest"), y[4]), 1), text)
        p18 = m[18](torch.cat((m[16](p15), p12), 1), text)
        p21 = m[21](torch.cat((m[19](p18), y[9]), 1), text)
        return m[22]([p15, p18, p21], text)

    def fuse(self):
        for module in self.modules():
            if isinstance(module, Conv) and module.bn is not None:
                module.fuse()
        return self


def randomize_batchnorm(net):
    """BatchNorm statistics and affine parameters drawn at random, so that a random network's folded weights differ
    from its unfolded ones (what the checks and the benchmark give their random networks)."""
    for module in net.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.3, 0.3)
    return net

