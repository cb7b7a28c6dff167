/// ftfy 6.3.1's mojibake heuristic (`ftfy.badness.is_bad`): does the text hold a character sequence
/// that is far likelier to be UTF-8 read in a single-byte encoding than intended text?
///
/// The heuristic is one regular expression, an alternation of short patterns over ftfy's character
/// categories (`MOJIBAKE_CATEGORIES`, generated from the reference into `ReferenceTables`). Each
/// alternative is written out below in the order ftfy lists it; `isBad` is `BADNESS_RE.search`.
enum MojibakeBadness {
    /// Bits of ftfy's categories.
    struct Category: OptionSet {
        let rawValue: UInt16
        static let common = Category(rawValue: 1 << 0)
        static let c1 = Category(rawValue: 1 << 1)
        static let bad = Category(rawValue: 1 << 2)
        static let law = Category(rawValue: 1 << 3)
        static let currency = Category(rawValue: 1 << 4)
        static let startPunctuation = Category(rawValue: 1 << 5)
        static let endPunctuation = Category(rawValue: 1 << 6)
        static let numeric = Category(rawValue: 1 << 7)
        static let kaomoji = Category(rawValue: 1 << 8)
        static let upperAccented = Category(rawValue: 1 << 9)
        static let lowerAccented = Category(rawValue: 1 << 10)
        static let upperCommon = Category(rawValue: 1 << 11)
        static let lowerCommon = Category(rawValue: 1 << 12)
        static let box = Category(rawValue: 1 << 13)
    }

    private static let categories: [UInt32: Category] = {
        var table: [UInt32: Category] = [:]
        let sources: [(Category, [UInt32])] = [
            (.common, ReferenceTables.ftfyMojibakeCommon), (.c1, ReferenceTables.ftfyMojibakeC1),
            (.bad, ReferenceTables.ftfyMojibakeBad), (.law, ReferenceTables.ftfyMojibakeLaw),
            (.currency, ReferenceTables.ftfyMojibakeCurrency),
            (.startPunctuation, ReferenceTables.ftfyMojibakeStartPunctuation),
            (.endPunctuation, ReferenceTables.ftfyMojibakeEndPunctuation),
            (.numeric, ReferenceTables.ftfyMojibakeNumeric), (.kaomoji, ReferenceTables.ftfyMojibakeKaomoji),
            (.upperAccented, ReferenceTables.ftfyMojibakeUpperAccented),
            (.lowerAccented, ReferenceTables.ftfyMojibakeLowerAccented),
            (.upperCommon, ReferenceTables.ftfyMojibakeUpperCommon),
            (.lowerCommon, ReferenceTables.ftfyMojibakeLowerCommon), (.box, ReferenceTables.ftfyMojibakeBox),
        ]
        for (category, flat) in sources {
            for index in stride(from: 0, to: flat.count, by: 2) {
                for value in flat[index]...flat[index + 1] { table[value, default: []].insert(category) }
            }
        }
        return table
    }()
    private static let word = CodePointSet(flatRanges: ReferenceTables.reWord)
    private static let space = CodePointSet(flatRanges: ReferenceTables.reSpace)

    static func category(_ value: UInt32) -> Category { value < 0x80 ? [] : categories[value] ?? [] }

    /// `BADNESS_RE.search(text) is not None`.
    static func isBad(_ text: [UInt32]) -> Bool {
        guard text.contains(where: { $0 >= 0x80 }) else { return false }
        let cats = text.map(category)
        for index in text.indices where matches(text, cats, at: index) { return true }
        return false
    }

    // Unions used by several alternatives.
    private static let accented: Category = [.lowerAccented, .upperAccented]
    private static let punctuation: Category = [.startPunctuation, .endPunctuation]
    private static let afterBad: Category = [
        .lowerAccented, .upperAccented, .box, .startPunctuation, .endPunctuation, .currency, .numeric, .law,
    ]

    /// The text seen from one position: the characters and categories at offsets 0, 1, 2, ...
    private struct Window {
        let t: [UInt32]
        let cats: [Category]
        let i: Int

        func char(_ k: Int) -> UInt32? { i + k < t.count ? t[i + k] : nil }
        func isIn(_ k: Int, _ set: Category) -> Bool { i + k < t.count && !cats[i + k].isDisjoint(with: set) }
        func isIn(_ k: Int, _ literal: String) -> Bool {
            guard let value = char(k) else { return false }
            return literal.unicodeScalars.contains { $0.value == value }
        }
        func isASCIILetter(_ k: Int, lowercaseOnly: Bool = false) -> Bool {
            guard let value = char(k) else { return false }
            return (0x61...0x7A).contains(value) || (!lowercaseOnly && (0x41...0x5A).contains(value))
        }
        func isSpace(_ k: Int) -> Bool { char(k).map { MojibakeBadness.space.contains($0) } ?? false }
        func isWord(_ k: Int) -> Bool { char(k).map { MojibakeBadness.word.contains($0) } ?? false }
        func equals(_ k: Int, _ scalar: Unicode.Scalar) -> Bool { char(k) == scalar.value }
    }

    private static func matches(_ t: [UInt32], _ cats: [Category], at i: Int) -> Bool {
        let window = Window(t: t, cats: cats, i: i)
        return matchesCategoryPattern(window) || matchesLiteralPattern(window)
    }

    /// The alternatives of `BADNESS_RE` up to `[lower_accented upper_accented] [start end] \w`.
    private static func matchesCategoryPattern(_ w: Window) -> Bool {
        // [c1]
        if w.isIn(0, .c1) { return true }
        // [bad lower_accented upper_accented box start end currency numeric law] [bad]
        if w.isIn(0, afterBad.union(.bad)) && w.isIn(1, .bad) { return true }
        // [a-zA-Z] [lower_common upper_common] [bad]
        if w.isASCIILetter(0) && w.isIn(1, [.lowerCommon, .upperCommon]) && w.isIn(2, .bad) { return true }
        // [bad] [lower_accented upper_accented box start end currency numeric law]
        if w.isIn(0, .bad) && w.isIn(1, afterBad) { return true }
        // [lower_accented lower_common box end currency numeric] [upper_accented]
        if w.isIn(0, [.lowerAccented, .lowerCommon, .box, .endPunctuation, .currency, .numeric])
            && w.isIn(1, .upperAccented)
        {
            return true
        }
        // [box end currency numeric] [lower_accented]
        if w.isIn(0, [.box, .endPunctuation, .currency, .numeric]) && w.isIn(1, .lowerAccented) { return true }
        // [lower_accented box end] [currency]
        if w.isIn(0, [.lowerAccented, .box, .endPunctuation]) && w.isIn(1, .currency) { return true }
        // \s [upper_accented] [currency]
        if w.isSpace(0) && w.isIn(1, .upperAccented) && w.isIn(2, .currency) { return true }
        // [upper_accented box] [numeric law]
        if w.isIn(0, [.upperAccented, .box]) && w.isIn(1, [.numeric, .law]) { return true }
        // [lower_accented upper_accented box currency end] [start] [numeric]
        if w.isIn(0, accented.union([.box, .currency, .endPunctuation])) && w.isIn(1, .startPunctuation)
            && w.isIn(2, .numeric)
        {
            return true
        }
        // [lower_accented upper_accented currency numeric box law] [end] [start]
        if w.isIn(0, accented.union([.currency, .numeric, .box, .law])) && w.isIn(1, .endPunctuation)
            && w.isIn(2, .startPunctuation)
        {
            return true
        }
        // [currency numeric box] [start]
        if w.isIn(0, [.currency, .numeric, .box]) && w.isIn(1, .startPunctuation) { return true }
        // [a-z] [upper_accented] [start currency]
        if w.isASCIILetter(0, lowercaseOnly: true) && w.isIn(1, .upperAccented)
            && w.isIn(2, [.startPunctuation, .currency])
        {
            return true
        }
        // [box] [kaomoji]
        if w.isIn(0, .box) && w.isIn(1, .kaomoji) { return true }
        // [lower_accented upper_accented currency numeric start end law] [box]
        if w.isIn(0, accented.union([.currency, .numeric, .law]).union(punctuation)) && w.isIn(1, .box) { return true }
        // [box] [end]
        if w.isIn(0, .box) && w.isIn(1, .endPunctuation) { return true }
        // [lower_accented upper_accented] [start end] \w
        if w.isIn(0, accented) && w.isIn(1, punctuation) && w.isWord(2) { return true }
        return false
    }

    /// The alternatives of `BADNESS_RE` from `[Œœ][^A-Za-z]` on: mostly literal characters.
    private static func matchesLiteralPattern(_ w: Window) -> Bool {
        let i = w.i
        // [Œœ][^A-Za-z]
        if w.isIn(0, "Œœ") && w.char(1) != nil && !w.isASCIILetter(1) { return true }
        // [upper_accented]°
        if w.isIn(0, .upperAccented) && w.equals(1, "°") { return true }
        // [ÂÃÎÐ][€œŠš¢£Ÿž\xa0\xad®©°·»{start}{end}–—´]
        if w.isIn(0, "ÂÃÎÐ") && (w.isIn(1, "€œŠš¢£Ÿž\u{A0}\u{AD}®©°·»–—´") || w.isIn(1, punctuation)) { return true }
        // × [²³]
        if w.equals(0, "×") && w.isIn(1, "²³") { return true }
        // [ØÙ] [common currency bad numeric start ŸŠ®°µ»] twice
        let afterOSlash: Category = [.common, .currency, .bad, .numeric, .startPunctuation]
        if w.isIn(0, "ØÙ") && (w.isIn(1, afterOSlash) || w.isIn(1, "ŸŠ®°µ»")) && w.isIn(2, "ØÙ")
            && (w.isIn(3, afterOSlash) || w.isIn(3, "ŸŠ®°µ»"))
        {
            return true
        }
        // à[²µ¹¼½¾]
        if w.equals(0, "à") && w.isIn(1, "²µ¹¼½¾") { return true }
        // √[±∂†≠®™´≤≥¥µø]
        if w.equals(0, "√") && w.isIn(1, "±∂†≠®™´≤≥¥µø") { return true }
        // ≈[°¢]
        if w.equals(0, "≈") && w.isIn(1, "°¢") { return true }
        // ‚Ä[ìîïòôúùû†°¢π]
        if w.equals(0, "‚") && w.equals(1, "Ä") && w.isIn(2, "ìîïòôúùû†°¢π") { return true }
        // ‚[âó][àä°ê]
        if w.equals(0, "‚") && w.isIn(1, "âó") && w.isIn(2, "àä°ê") { return true }
        // вЂ
        if w.equals(0, "в") && w.equals(1, "Ђ") { return true }
        // [ВГРС][c1 bad start end currency °µ][ВГРС]
        let cyrillicMiddle: Category = [.c1, .bad, .startPunctuation, .endPunctuation, .currency]
        if w.isIn(0, "ВГРС") && (w.isIn(1, cyrillicMiddle) || w.isIn(1, "°µ")) && w.isIn(2, "ВГРС") { return true }
        // ГўВЂВ.[A-Za-z ]
        if w.equals(0, "Г") && w.equals(1, "ў") && w.equals(2, "В") && w.equals(3, "Ђ") && w.equals(4, "В")
            && w.char(5) != nil && w.char(5) != 0x0A && (w.isASCIILetter(6) || w.equals(6, " "))
        {
            return true
        }
        // Ã[\xa0¡]
        if w.equals(0, "Ã") && w.isIn(1, "\u{A0}¡") { return true }
        // [a-z]\s?[ÃÂ][ ]
        if w.isASCIILetter(0, lowercaseOnly: true) {
            if w.isSpace(1) && w.isIn(2, "ÃÂ") && w.equals(3, " ") { return true }
            if w.isIn(1, "ÃÂ") && w.equals(2, " ") { return true }
        }
        // ^[ÃÂ][ ]
        if i == 0 && w.isIn(0, "ÃÂ") && w.equals(1, " ") { return true }
        // [a-z.,?!{end}] Â [ {start}{end}]
        if (w.isASCIILetter(0, lowercaseOnly: true) || w.isIn(0, ".,?!") || w.isIn(0, .endPunctuation))
            && w.equals(1, "Â")
            && (w.equals(2, " ") || w.isIn(2, punctuation))
        {
            return true
        }
        // β€[™\xa0Ά\xad®°]
        if w.equals(0, "β") && w.equals(1, "€") && w.isIn(2, "™\u{A0}Ά\u{AD}®°") { return true }
        // [ΒΓΞΟ][c1 bad start end currency °][ΒΓΞΟ]
        if w.isIn(0, "ΒΓΞΟ") && (w.isIn(1, cyrillicMiddle) || w.equals(1, "°")) && w.isIn(2, "ΒΓΞΟ") { return true }
        // ā€
        if w.equals(0, "ā") && w.equals(1, "€") { return true }
        return false
    }
}
