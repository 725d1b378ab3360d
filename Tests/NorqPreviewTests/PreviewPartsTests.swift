import Foundation
import NorqPreview
import Testing

/// The preview's parts without a server: where text is cut, and the watcher.
@Suite struct PreviewPartsTests {
    @Test func textLongerThanAPlatformShowsIsCutWithAnEllipsis() {
        let long = String(repeating: "word ", count: 60)
        let cut = PreviewPlatforms.cut(long, PreviewPlatforms.iosCuts.body)
        #expect(cut.truncated)
        #expect(cut.text.hasSuffix("…"))
        #expect(cut.text.count <= PreviewPlatforms.iosCuts.body + 1)
        let short = PreviewPlatforms.cut("Hi\nthere", 38)
        #expect(short == ("Hi there", false))
    }

    @Test func theWatcherSeesAWriteAnAdditionAndARemoval() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("norq-watch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("a"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("a/push.md")
        try "one".write(to: file, atomically: false, encoding: .utf8)
        let watcher = PreviewWatcher(paths: [folder.path])
        let first = watcher.look()
        #expect(first.count == 1)
        #expect(watcher.look() == first)
        Thread.sleep(forTimeInterval: 0.02)  // past the file system clock tick
        try "two".write(to: file, atomically: false, encoding: .utf8)  // same size: the time tells
        let second = watcher.look()
        #expect(second != first)
        try "x".write(to: folder.appendingPathComponent("a/data.samples.yaml"), atomically: false, encoding: .utf8)
        #expect(watcher.look().count == 2)
        try FileManager.default.removeItem(at: file)
        #expect(watcher.look().count == 1)
        // Bounded: at most maximumFiles files are looked at.
        #expect(PreviewWatcher(paths: [folder.path], maximumFiles: 0).look().isEmpty)
    }
}
