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
        for (index, bottleneck) in block.blocks.enumerated() {
            let middle = try check(bottleneck.cv1, "\(name).m.\(index).cv1", receives: half)
            let out = try check(bottleneck.cv2, "\(name).m.\(index).cv2", receives: middle)
            guard out == half else { throw fail("\(name).m.\(index).cv2 gives \(out) channels, expected \(half)") }
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

    func check(_ block: SPPF, _ name: String, receives channels: Int) throws(WeightsError) -> Int {
        let hidden = try check(block.cv1, name + ".cv1", receives: channels)
        return try check(block.cv2, name + ".cv2", receives: 4 * hidden)
    }
}

extension YOLOWorldNetwork {
    /// Follows the channel counts from the 3-channel image through backbone, neck and head; returns the
    /// backbone outputs' channels.
    func checkConnections(path: String) throws(WeightsError) -> [Int] {
        let check = ConnectionCheck(path: path)
        let text = embeddingSize
        var channels = try check.check(stem[0], "model.0", receives: 3)
        channels = try check.check(stem[1], "model.1", receives: channels)
        channels = try check.check(stages[0], "model.2", receives: channels)
        channels = try check.check(stem[2], "model.3", receives: channels)
        let p3 = try check.check(stages[1], "model.4", receives: channels)
        channels = try check.check(stem[3], "model.5", receives: p3)
        let p4 = try check.check(stages[2], "model.6", receives: channels)
        channels = try check.check(stem[4], "model.7", receives: p4)
        channels = try check.check(stages[3], "model.8", receives: channels)
        let p5 = try check.check(sppf, "model.9", receives: channels)
        let x12 = try check.check(neck12, "model.12", receives: p5 + p4, text: text)
        let x15 = try check.check(neck15, "model.15", receives: x12 + p3, text: text)
        let d16 = try check.check(down16, "model.16", receives: x15)
        let x18 = try check.check(neck18, "model.18", receives: d16 + x12, text: text)
        let d19 = try check.check(down19, "model.19", receives: x18)
        let x21 = try check.check(neck21, "model.21", receives: d19 + p5, text: text)
        for (index, (level, inputs)) in zip(detectHead.levels, [x15, x18, x21]).enumerated() {
            var box = inputs
            var embedding = inputs
            for (k, layer) in level.box.enumerated() {
                box = try check.check(layer, "model.22.cv2.\(index).\(k)", receives: box)
            }
            for (k, layer) in level.embedding.enumerated() {
                embedding = try check.check(layer, "model.22.cv3.\(index).\(k)", receives: embedding)
            }
            guard box == 4 * detectHead.bins, detectHead.bins > 0 else {
                throw check.fail("model.22.cv2.\(index).2 gives \(box) channels, expected 4 × \(detectHead.bins) bins")
            }
            guard embedding == text, level.normScale.count == text else {
                throw check.fail("model.22.cv3.\(index).2 gives \(embedding) channels, expected \(text)")
            }
            guard level.box.allSatisfy({ $0.stride == 1 }), level.embedding.allSatisfy({ $0.stride == 1 }) else {
                throw check.fail("model.22 level \(index) has a strided convolution")
            }
        }
        return [p3, p4, p5]
    }
}
