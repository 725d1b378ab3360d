import CNorqZlib

/// Gzip (RFC 1952) with the system zlib, for the Expo provider (request bodies over 1 KiB, gzipped answers) and the
/// Expo emulator (gzipped request bodies), which may not depend on each other: one wrapper for both.
public enum Gzip {
    /// `bytes` gzipped at zlib's fastest level (1: a batch of 100 similar messages shrinks ~10x all the same, at a
    /// fraction of the default level's CPU), or nil when zlib fails (the caller then sends them as they are). The
    /// output is bounded by zlib's `deflateBound` of the input.
    public static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
        guard deflateInit2_(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, UInt(bytes.count))) + 32
        var output = [UInt8](repeating: 0, count: bound)
        var input = bytes
        let result: Int32 = input.withUnsafeMutableBufferPointer { inputBuffer in
            output.withUnsafeMutableBufferPointer { outputBuffer in
                stream.next_in = inputBuffer.baseAddress
                stream.avail_in = UInt32(inputBuffer.count)
                stream.next_out = outputBuffer.baseAddress
                stream.avail_out = UInt32(outputBuffer.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard result == Z_STREAM_END else { return nil }
        output.removeLast(bound - Int(stream.total_out))
        return output
    }

    /// Inflates a gzip or zlib body (auto-detected), or nil when it is malformed or inflates past `limit` bytes.
    public static func decompress(_ bytes: [UInt8], limit: Int) -> [UInt8]? {
        var stream = z_stream()
        // windowBits 15 + 32: gzip or zlib header, detected.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var input = bytes
        return input.withUnsafeMutableBufferPointer { inputBuffer -> [UInt8]? in
            stream.next_in = inputBuffer.baseAddress
            stream.avail_in = UInt32(inputBuffer.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { chunkBuffer -> (Int32, Int) in
                    stream.next_out = chunkBuffer.baseAddress
                    stream.avail_out = UInt32(chunkBuffer.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, chunkBuffer.count - Int(stream.avail_out))
                }
                guard status == Z_OK || status == Z_STREAM_END else { return nil }
                output.append(contentsOf: chunk[0..<produced])
                if output.count > limit { return nil }
                if status == Z_STREAM_END { return output }
                if produced == 0 && stream.avail_in == 0 { return nil }  // truncated
            }
        }
    }
}
