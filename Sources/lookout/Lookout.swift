import ArgumentParser

@main
struct Lookout: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookout",
        abstract: "Open-vocabulary object detection: type what you are looking for, and Lookout finds it.",
        discussion: """
            Lookout pairs the YOLO-World v2 detector with the CLIP text encoder, on the CPU, and gives \
            the boxes ultralytics gives for the same weights. Without --model it uses the embedded demo \
            model (Models/demo), which knows coloured shapes only; Models/README.md tells how to get the \
            official weights.

            Start here:
              lookout detect examples/scenes/scene-0001.jpg -q "green star" --save out
              lookout query photo.jpg        new queries, image features kept
              lookout index ~/Pictures       then: lookout search "red car"

            Exit status: 0 success; 1 error (nothing done: a missing model, an unreadable index, …); 2 partial \
            failure (some photos could not be read or indexed, the others were); 64 usage error (a wrong option \
            or value, wherever it is noticed).
            """,
        version: "0.1.0",
        subcommands: [
            DetectCommand.self, QueryCommand.self, IndexCommand.self, SearchCommand.self, TokenizeCommand.self,
            EmbedCommand.self, ModelsCommand.self,
        ]
    )
}
