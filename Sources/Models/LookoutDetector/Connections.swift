import LookoutWeights

/// Load-time checks that the layers read from a file fit together: every map a layer receives has the
/// channel count its weights expect. The compute code indexes buffers by these counts, so a file that
/// passed these checks cannot make it read or write out of bounds.
struct ConnectionCheck {
    let path: String

    func fail(_ problem: String) -> WeightsError {
        WeightsError(path: path, kind: .layersDoNotConnect, problem: problem)
    }

    func expect(_ name: String, inputs: Int, receives channels: Int) throws(WeightsError) {
        guard inputs == channels else {
            throw fail("\(name) takes \(inputs) input channels but the layers before it give \(channels)")
        }
    }

    func check(_ convolution: Convolution, _ name: String, receives channels: Int) throws(WeightsError) -> Int {
        guard convolution.kernel % 2 == 1, convolution.kernel <= 15, convolution.outputs > 0 else {
            throw fail(
                "\(name) has a \(convolution.kernel)×\(convolution.kernel) kernel: expected an odd size up to 15")
        }
        try expect(name, inputs: convolution.inputs, receives: channels)
        return convolution.outputs
    }

    /// `C2f` (and `C2fAttn`) receiving `channels`; returns its output channels.
    func check(_ block: C2f, _ name: String, receives channels: Int, text: Int? = nil) throws(WeightsError) -> Int {
        let hidden = try check(block.cv1, name + ".cv1", receives: channels)
        guard hidden % 2 == 0 else { throw fail("\(name).cv1 gives \(hidden) channels, which do not split in halves") }
        let half = hidden / 2
        var concatenated = hidden
        for (index, inner) in block.blocks.enumerated() {
            let out: Int
            switch inner {
            case .bottleneck(let bottleneck):
                out = try check(bottleneck, "\(name).m.\(index)", receives: half)
            case .c3k(let c3k):
                let hidden = try check(c3k.cv1, "\(name).m.\(index).cv1", receives: half)
                var chain = hidden
                for (k, bottleneck) in c3k.blocks.enumerated() {
                    chain = try check(bottleneck, "\(name).m.\(index).m.\(k)", receives: chain)
                    guard chain == hidden else {
                        throw fail("\(name).m.\(index).m.\(k).cv2 gives \(chain) channels, expected \(hidden)")
                    }
                }
                let side = try check(c3k.cv2, "\(name).m.\(index).cv2", receives: half)
                out = try check(c3k.cv3, "\(name).m.\(index).cv3", receives: chain + side)
            case .attention(let bottleneck, let attention):
                let inner = try check(bottleneck, "\(name).m.\(index).0", receives: half)
                out = try check(attention, "\(name).m.\(index).1", receives: inner)
            }
            guard out == half else { throw fail("\(name).m.\(index) gives \(out) channels, expected \(half)") }
            concatenated += half
        }
        if let attention = block.attention {
            guard attention.channels == half else {
                throw fail("\(name).attn.gl gives \(attention.channels) channels, expected \(half)")
            }
            let out = try check(attention.projection, name + ".attn.proj_conv", receives: half)
            guard out == half else { throw fail("\(name).attn.proj_conv gives \(out) channels, expected \(half)") }
            if let text, attention.guideChannels != text {
                throw fail(
                    "\(name).attn.gl takes \(attention.guideChannels)-d text, the head's embeddings are \(text)-d")
            }
            concatenated += half
        }
        return try check(block.cv2, name + ".cv2", receives: concatenated)
    }

    /// A Bottleneck receiving `channels`; returns its output channels (a shortcut needs them equal, which
    /// ``Bottleneck`` checks when it decides whether to add).
    func check(_ block: Bottleneck, _ name: String, receives channels: Int) throws(WeightsError) -> Int {
        let middle = try check(block.cv1, name + ".cv1", receives: channels)
        return try check(block.cv2, name + ".cv2", receives: middle)
    }

    func check(_ block: SPPF, _ name: String, receives channels: Int) throws(WeightsError) -> Int {
        let hidden = try check(block.cv1, name + ".cv1", receives: channels)
        return try check(block.cv2, name + ".cv2", receives: 4 * hidden)
    }
}

extension ConnectionCheck {
    /// The detection head on the neck's three maps (its embeddings `text`-d wide).
    func check(_ head: ContrastiveHead, _ prefix: String, receives maps: [Int]) throws(WeightsError) {
        let named = prefix + "." + head.branch  // model.23.cv2.0, model.23.one2one_cv2.0, …
        for (index, (level, inputs)) in zip(head.levels, maps).enumerated() {
            let box = try check(chain: level.box, "\(named)cv2.\(index)", receives: inputs)
            var embedding = try check(hidden: level.hidden, "\(named)cv3.\(index)", receives: inputs)
            embedding = try check(level.last, "\(named)cv3.\(index).2", receives: embedding)
            guard box == 4 * head.bins, head.bins > 0 else {
                throw fail("\(named)cv2.\(index).2 gives \(box) channels, expected 4 × \(head.bins) bins")
            }
            guard embedding == head.embeddingSize, level.normScale.count == head.embeddingSize else {
                throw fail("\(named)cv3.\(index).2 gives \(embedding) channels, expected \(head.embeddingSize)")
            }
            try check(
                mask: level.mask, "\(named)cv5.\(index)", receives: inputs, coefficients: head.maskCoefficients)
            let strided = level.box + level.mask + [level.last]
            guard strided.allSatisfy({ $0.stride == 1 }) else {
                throw fail("\(prefix) level \(index) has a strided convolution")
            }
        }
    }
}

extension ConnectionCheck {
    /// The backbone from the 3-channel image; returns P3's, P4's and P5's channels.
    func check(_ backbone: Backbone) throws(WeightsError) -> [Int] {
        let (stem, stages) = (backbone.stem, backbone.stages)
        var channels = try check(stem[0], "model.0", receives: 3)
        channels = try check(stem[1], "model.1", receives: channels)
        channels = try check(stages[0], "model.2", receives: channels)
        channels = try check(stem[2], "model.3", receives: channels)
        let p3 = try check(stages[1], "model.4", receives: channels)
        channels = try check(stem[3], "model.5", receives: p3)
        let p4 = try check(stages[2], "model.6", receives: channels)
        channels = try check(stem[4], "model.7", receives: p4)
        channels = try check(stages[3], "model.8", receives: channels)
        var p5 = try check(backbone.sppf, "model.9", receives: channels)
        if let attention = backbone.attention { p5 = try check(attention, "model.10", receives: p5) }
        return [p3, p4, p5]
    }
}

extension YOLOWorldNetwork {
    /// Follows the channel counts from the 3-channel image through backbone, neck and head; returns the
    /// backbone outputs' channels.
    func checkConnections(path: String) throws(WeightsError) -> [Int] {
        let check = ConnectionCheck(path: path)
        let text = embeddingSize
        let outputs = try check.check(layers)
        let (p3, p4, p5) = (outputs[0], outputs[1], outputs[2])
        let x12 = try check.check(neck12, "model.12", receives: p5 + p4, text: text)
        let x15 = try check.check(neck15, "model.15", receives: x12 + p3, text: text)
        let d16 = try check.check(down16, "model.16", receives: x15)
        let x18 = try check.check(neck18, "model.18", receives: d16 + x12, text: text)
        let d19 = try check.check(down19, "model.19", receives: x18)
        let x21 = try check.check(neck21, "model.21", receives: d19 + p5, text: text)
        try check.check(detectHead, "model.22", receives: [x15, x18, x21])
        return outputs
    }
}

extension ConnectionCheck {
    /// A prompt-free head: each level's box and classification branches, mask branch, and `lrpc` convolutions
    /// receive what the branch before them gives.
    func check(_ head: PromptFreeHead, _ name: String, receives maps: [Int]) throws(WeightsError) {
        let named = name + "." + head.branch  // model.23.cv2.0, or model.23.one2one_cv2.0
        for (index, (level, inputs)) in zip(head.levels, maps).enumerated() {
            var box = try check(chain: level.box, "\(named)cv2.\(index)", receives: inputs)
            box = try check(level.location, "\(name).lrpc.\(index).loc", receives: box)
            guard box == 4 * head.bins, head.bins > 0 else {
                throw fail("\(name).lrpc.\(index).loc gives \(box) channels, expected 4 × \(head.bins) bins")
            }
            let hidden = try check(hidden: level.hidden, "\(named)cv3.\(index)", receives: inputs)
            guard level.vocabulary.count == head.names * hidden else {
                throw fail(
                    "\(name).lrpc.\(index).vocab takes \(level.vocabulary.count / max(head.names, 1)) channels, the classification branch gives \(hidden)"
                )
            }
            if let filter = level.filter, filter.weights.count != hidden {
                throw fail("\(name).lrpc.\(index).pf takes \(filter.weights.count) channels, expected \(hidden)")
            }
            try check(
                mask: level.mask, "\(named)cv5.\(index)", receives: inputs, coefficients: head.maskCoefficients)
        }
    }
}

extension ConnectionCheck {
    /// A head level's classification (`cv3`) layers before their last convolution; returns their channels.
    func check(hidden layers: [HeadLayer], _ prefix: String, receives inputs: Int) throws(WeightsError) -> Int {
        var channels = inputs
        for (k, layer) in layers.enumerated() {
            let layerName = "\(prefix).\(layers.count == 4 ? "\(k / 2).\(k % 2)" : "\(k)")"
            switch layer {
            case .conv(let convolution): channels = try check(convolution, layerName, receives: channels)
            case .depthwise(let depthwise): try expect(layerName, inputs: depthwise.inputs, receives: channels)
            }
        }
        return channels
    }

    /// A chain of convolutions named `prefix.0`, `prefix.1`, …; returns the last one's channels.
    func check(chain layers: [Convolution], _ prefix: String, receives inputs: Int) throws(WeightsError) -> Int {
        var channels = inputs
        for (k, layer) in layers.enumerated() { channels = try check(layer, "\(prefix).\(k)", receives: channels) }
        return channels
    }

    /// A segmentation head level's mask branch (`cv5`), when it has one.
    func check(
        mask layers: [Convolution], _ prefix: String, receives inputs: Int, coefficients: Int
    ) throws(WeightsError) {
        guard !layers.isEmpty else { return }
        let mask = try check(chain: layers, prefix, receives: inputs)
        guard mask == coefficients else {
            throw fail("\(prefix).\(layers.count - 1) gives \(mask) channels, expected \(coefficients)")
        }
    }
}
