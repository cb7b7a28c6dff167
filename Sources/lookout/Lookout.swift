import ArgumentParser

@main
struct Lookout: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookout",
        abstract: "Open-vocabulary object detection: type what you are looking for, and Lookout finds it.",
        discussion: """
            Lookout pairs the YOLO-World v2 detector with the CLIP text encoder, on the CPU.
            Its first building block is the CLIP tokenizer, which gives exactly the token ids of
            OpenAI's `clip.tokenize`.
            """,
        version: "0.1.0",
        subcommands: [
            DetectCommand.self, QueryCommand.self, IndexCommand.self, SearchCommand.self, TokenizeCommand.self, EmbedCommand.self, ModelsCommand.self,
        ]
    )
}
