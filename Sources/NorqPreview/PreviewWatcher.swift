import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Notices that a watched file changed by polling: each look lists the watched folders (recursively, hidden
/// entries skipped, at most `maximumFiles` files) and `stat`s each file, and compares path, size and
/// modification time (nanoseconds) with the last look. Polling rather than inotify: Foundation offers no file
/// system events on Linux (libdispatch has no vnode sources there), and inotify through Glibc would need a watch
/// per folder kept in step with folders made and removed, and a blocking read off the cooperative pool; a
/// template project is a few dozen files, so a look every 100 ms costs microseconds; a bigger project is looked at less often (see `PreviewService.watch(from:)`).
package struct PreviewWatcher: Sendable {
    /// One file's state.
    package struct Stamp: Hashable, Sendable {
        package var size: Int64
        package var seconds: Int
        package var nanoseconds: Int
    }

    /// The files and folders watched.
    package var paths: [String]
    /// A bound on the files looked at per poll (a project bigger than this is watched in part).
    package var maximumFiles = 10_000

    package init(paths: [String], maximumFiles: Int = 10_000) {
        self.paths = paths
        self.maximumFiles = maximumFiles
    }

    /// The state of every watched file now.
    package func look() -> [String: Stamp] {
        var stamps: [String: Stamp] = [:]
        for path in paths {
            guard stamps.count < maximumFiles else { break }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            if !isDirectory.boolValue {
                stamps[path] = Self.stamp(path)
                continue
            }
            guard let enumerator = FileManager.default.enumerator(
                at: URL(fileURLWithPath: path), includingPropertiesForKeys: nil,
                options: [.skipsHiddenFiles]) else { continue }
            for case let url as URL in enumerator {
                guard stamps.count < maximumFiles else { break }
                let file = url.path
                if let stamp = Self.stamp(file) { stamps[file] = stamp }
            }
        }
        return stamps
    }

    /// Size and modification time of a regular file; nil for a folder or a file that vanished.
    static func stamp(_ path: String) -> Stamp? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        #if canImport(Darwin)
        return Stamp(size: Int64(info.st_size), seconds: info.st_mtimespec.tv_sec, nanoseconds: info.st_mtimespec.tv_nsec)
        #else
        return Stamp(size: Int64(info.st_size), seconds: info.st_mtim.tv_sec, nanoseconds: info.st_mtim.tv_nsec)
        #endif
    }
}
