/// Disjoint sets over 0..<count (union-find with path halving): which items a set of links joins into groups.
/// A union keeps the smaller root, so a group's root is its smallest member's root.
public struct DisjointSets: Sendable {
    private var parent: [Int]

    public init(count: Int) { parent = Array(0..<count) }

    /// The root of `x`'s group (the same for every member).
    public mutating func root(_ x: Int) -> Int {
        var x = x
        while parent[x] != x {
            parent[x] = parent[parent[x]]
            x = parent[x]
        }
        return x
    }

    /// Joins the groups of `a` and `b`.
    public mutating func union(_ a: Int, _ b: Int) {
        let (ra, rb) = (root(a), root(b))
        if ra != rb { parent[max(ra, rb)] = min(ra, rb) }
    }
}
