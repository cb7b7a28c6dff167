import LookoutSupport

/// Matching tracks to detections by cost, as ByteTrack does it through `lap.lapjv(cost, extend_cost=True,
/// cost_limit=threshold)`: the rows × columns costs are extended to a square of rows + columns, where leaving a
/// row or a column unmatched costs threshold/2 (so a pair is matched only if that beats leaving both alone), and
/// the least-cost perfect matching of the square is taken. Solved here by the shortest-augmenting-path
/// (Hungarian) method, which finds the same optimum as Jonker–Volgenant; only exact ties between two optimal
/// matchings could be broken differently.
public enum Assignment {
    /// The matched (row, column) pairs in row order, and the rows and columns left unmatched (ascending).
    public struct Result: Equatable, Sendable {
        public var matches: [(row: Int, column: Int)]
        public var unmatchedRows: [Int]
        public var unmatchedColumns: [Int]

        public static func == (a: Result, b: Result) -> Bool {
            a.matches.map { [$0.row, $0.column] } == b.matches.map { [$0.row, $0.column] }
                && a.unmatchedRows == b.unmatchedRows && a.unmatchedColumns == b.unmatchedColumns
        }
    }

    /// `costs` is rows × columns, row-major.
    ///
    /// Only pairs cheaper than `threshold` can be in the optimum (a pair costing more is beaten by leaving both
    /// unmatched, threshold/2 each), so the problem splits into the connected groups of such pairs, each solved
    /// on its own: a frame of hundreds of boxes costs a few small problems instead of one of rows + columns.
    public static func solve(_ costs: [Double], rows: Int, columns: Int, threshold: Double) -> Result {
        guard rows > 0, columns > 0 else {
            return Result(matches: [], unmatchedRows: Array(0..<rows), unmatchedColumns: Array(0..<columns))
        }
        // Groups: union-find over rows (0..<rows) and columns (rows..<rows + columns) joined by cheap pairs.
        var sets = DisjointSets(count: rows + columns)
        var cheap = false
        for i in 0..<rows {
            for j in 0..<columns where costs[i * columns + j] < threshold {
                cheap = true
                sets.union(i, rows + j)
            }
        }
        guard cheap else {
            return Result(matches: [], unmatchedRows: Array(0..<rows), unmatchedColumns: Array(0..<columns))
        }
        var groups: [Int: (rows: [Int], columns: [Int])] = [:]
        for i in 0..<rows { groups[sets.root(i), default: ([], [])].rows.append(i) }
        for j in 0..<columns { groups[sets.root(rows + j), default: ([], [])].columns.append(j) }
        var columnOfRow = [Int](repeating: -1, count: rows)
        for group in groups.values where !group.rows.isEmpty && !group.columns.isEmpty {
            var part = [Double](repeating: 0, count: group.rows.count * group.columns.count)
            for (a, i) in group.rows.enumerated() {
                for (b, j) in group.columns.enumerated() { part[a * group.columns.count + b] = costs[i * columns + j] }
            }
            let solved = solveWhole(part, rows: group.rows.count, columns: group.columns.count, threshold: threshold)
            for (a, b) in solved.matches { columnOfRow[group.rows[a]] = group.columns[b] }
        }
        var matches: [(row: Int, column: Int)] = []
        var columnMatched = [Bool](repeating: false, count: columns)
        for i in 0..<rows where columnOfRow[i] >= 0 {
            matches.append((i, columnOfRow[i]))
            columnMatched[columnOfRow[i]] = true
        }
        return Result(
            matches: matches, unmatchedRows: (0..<rows).filter { columnOfRow[$0] < 0 },
            unmatchedColumns: (0..<columns).filter { !columnMatched[$0] })
    }

    /// The whole extended problem at once (what `solve` splits; kept for comparison).
    public static func solveWhole(_ costs: [Double], rows: Int, columns: Int, threshold: Double) -> Result {
        let n = rows + columns
        var square = [Double](repeating: threshold / 2, count: n * n)
        for i in rows..<n {
            for j in columns..<n { square[i * n + j] = 0 }
        }
        for i in 0..<rows {
            for j in 0..<columns { square[i * n + j] = costs[i * columns + j] }
        }
        let columnOfRow = minimumCostMatching(square, size: n)
        var matches: [(row: Int, column: Int)] = []
        var rowMatched = [Bool](repeating: false, count: rows)
        var columnMatched = [Bool](repeating: false, count: columns)
        for i in 0..<rows where columnOfRow[i] < columns {
            matches.append((i, columnOfRow[i]))
            rowMatched[i] = true
            columnMatched[columnOfRow[i]] = true
        }
        return Result(
            matches: matches, unmatchedRows: (0..<rows).filter { !rowMatched[$0] },
            unmatchedColumns: (0..<columns).filter { !columnMatched[$0] })
    }

    /// The least-cost perfect matching of a square cost matrix: the column of each row.
    static func minimumCostMatching(_ cost: [Double], size n: Int) -> [Int] {
        // Potentials u (rows) and v (columns), 1-based with a virtual row/column 0.
        var u = [Double](repeating: 0, count: n + 1)
        var v = [Double](repeating: 0, count: n + 1)
        var rowOfColumn = [Int](repeating: 0, count: n + 1)
        var way = [Int](repeating: 0, count: n + 1)
        for row in 1...n {
            rowOfColumn[0] = row
            var column0 = 0
            var minimum = [Double](repeating: .infinity, count: n + 1)
            var used = [Bool](repeating: false, count: n + 1)
            repeat {
                used[column0] = true
                let i0 = rowOfColumn[column0]
                var delta = Double.infinity
                var column1 = 0
                for j in 1...n where !used[j] {
                    let reduced = cost[(i0 - 1) * n + (j - 1)] - u[i0] - v[j]
                    if reduced < minimum[j] {
                        minimum[j] = reduced
                        way[j] = column0
                    }
                    if minimum[j] < delta {
                        delta = minimum[j]
                        column1 = j
                    }
                }
                for j in 0...n {
                    if used[j] {
                        u[rowOfColumn[j]] += delta
                        v[j] -= delta
                    } else {
                        minimum[j] -= delta
                    }
                }
                column0 = column1
            } while rowOfColumn[column0] != 0
            repeat {
                let column1 = way[column0]
                rowOfColumn[column0] = rowOfColumn[column1]
                column0 = column1
            } while column0 != 0
        }
        var columnOfRow = [Int](repeating: 0, count: n)
        for j in 1...n { columnOfRow[rowOfColumn[j] - 1] = j - 1 }
        return columnOfRow
    }
}
