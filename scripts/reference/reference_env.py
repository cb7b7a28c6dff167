"""Import-time set-up shared by the reference scripts.

PyPI's torchvision wheels are CUDA builds: on a CPU-only torch their compiled ops cannot load, and
`import torchvision` then fails while registering fake kernels for those ops. The reference code
needs only torchvision's pure-Python parts (`clip` imports `torchvision.transforms`), so when the
compiled ops are unavailable the fake-kernel registration module is skipped. ultralytics uses
torchvision's NMS only when torchvision is already imported; `forget_torchvision()` removes it again
so that ultralytics takes its own `TorchNMS` path (same rule: keep if IoU <= threshold).
"""
import importlib.util
import sys
import types
import warnings

warnings.filterwarnings("ignore", message="pkg_resources is deprecated")


def _torchvision_ops_loadable() -> bool:
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        return True
    import ctypes
    import os

    import torch  # noqa: F401  (loads libtorch so that the extension's dependencies resolve)

    lib = os.path.join(os.path.dirname(spec.origin), "_C.so")
    try:
        ctypes.CDLL(lib)
        return True
    except OSError:
        return False


_STUB_NEEDED = "torchvision" not in sys.modules and not _torchvision_ops_loadable()
if _STUB_NEEDED:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")


def forget_torchvision() -> None:
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]
    if _STUB_NEEDED:  # a later import (e.g. by an exporter) must still skip the fake-kernel registrations
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")


def realistic_random_clip_(model) -> None:
    """Random values of a realistic spread for an OpenAI CLIP model, in place.

    CLIP's own initialisation leaves LayerNorm weights at exactly 1 and biases at 0, which would hide
    mistakes in how a port applies them.
    """
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "ln" in name:
                parameter.copy_(1 + 0.1 * torch.randn_like(parameter) if name.endswith("weight")
                                else 0.1 * torch.randn_like(parameter))
            elif name.endswith("bias"):
                parameter.copy_(0.02 * torch.randn_like(parameter))


def ultralytics_nms_without_torchvision() -> None:
    """Makes ultralytics' predictors use its own NMS (TorchNMS, the same rule): they import torchvision, whose
    compiled ops cannot load on the CPU build of torch, so it is forgotten before every suppression."""
    from ultralytics.utils import nms

    suppress = nms.non_max_suppression

    def without_torchvision(*args, **kwargs):
        forget_torchvision()
        return suppress(*args, **kwargs)

    nms.non_max_suppression = without_torchvision
    forget_torchvision()
