/// A row-major matrix of `rows × columns` floats: the towers' activations, one row per token, several sequences
/// packed one after another. It is a ``FeatureMap`` of one channel, `rows` high and `columns` wide, so that it
/// lives where a map lives: on the host, or in a backend's memory between the backend's operations (a GPU keeps a
/// tower's activations there from the first layer to the last).
public struct RowMatrix: Sendable {
    public var map: FeatureMap

    public var rows: Int { map.height }
    public var columns: Int { map.width }

    public init(rows: Int, columns: Int, data: [Float]) {
        map = FeatureMap(channels: 1, height: rows, width: columns, data: data)
    }

    /// The map's values as a matrix (`map.channels` must be 1).
    public init(_ map: FeatureMap) {
        precondition(map.channels == 1, "a row matrix is a map of one channel")
        self.map = map
    }

    /// The values, row after row (read back from a backend's memory where they live there).
    public var data: [Float] {
        get { map.data }
        set { map.data = newValue }
        _modify { yield &map.data }
    }

    /// Where a GPU backend keeps the values (nil: on the host).
    public var device: (any DeviceStorage)? { map.device }
}
