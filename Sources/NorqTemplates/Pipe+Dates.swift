import Foundation
import NorqCore

/// An instant with the UTC offset it should be shown in (used by the `date` and `timezone` pipes).
struct DateValue {
    var epoch: Int64
    var offsetSeconds: Int

    static let monthNames = ["January", "February", "March", "April", "May", "June", "July", "August",
                             "September", "October", "November", "December"]
    static let dayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

    /// Epoch seconds (number or digit string) or ISO-8601 (`2024-05-01`, `2024-05-01T12:30:00Z`, `...+02:00`).
    /// Epoch seconds accepted: years 0001 to 9999.
    static let epochRange: ClosedRange<Int64> = -62_135_596_800...253_402_300_799

    static func parse(_ value: JSONValue?) -> DateValue? {
        guard let parsed = parseUnchecked(value), epochRange.contains(parsed.epoch) else { return nil }
        return parsed
    }

    private static func parseUnchecked(_ value: JSONValue?) -> DateValue? {
        switch value {
        case .int(let i)?: return DateValue(epoch: i, offsetSeconds: 0)
        case .double(let d)? where d.isFinite && Swift.abs(d) < 1e15:
            return DateValue(epoch: Int64(d.rounded(.down)), offsetSeconds: 0)
        case .string(let s)?:
            if let i = Int64(s) { return DateValue(epoch: i, offsetSeconds: 0) }
            return parseISO(Array(s.utf8))
        default: return nil
        }
    }

    private static func parseISO(_ b: [UInt8]) -> DateValue? {
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in 0..<n {
                let c = b[i + k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                v = v * 10 + Int(c - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        var hour = 0, minute = 0, second = 0, offset = 0
        if i < b.count, b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: " ") {
            i += 1
            guard let h = digits(2), expect(":"), let m = digits(2), h < 24, m < 60 else { return nil }
            hour = h; minute = m
            if expect(":") {
                guard let s = digits(2), s < 61 else { return nil }
                second = s
                if expect(".") { while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 } }
            }
            if expect("Z") {
                offset = 0
            } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
                let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
                i += 1
                guard let oh = digits(2) else { return nil }
                _ = expect(":")
                let om = digits(2) ?? 0
                offset = sign * (oh * 3600 + om * 60)
            }
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let local = Int64(days) * 86400 + Int64(hour * 3600 + minute * 60 + second)
        return DateValue(epoch: local - Int64(offset), offsetSeconds: offset)
    }

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    static func civilFromDays(_ z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// Seconds east of UTC for `UTC`, `Z`, `+02:00`, `-0530`, or an IANA name such as `Europe/Paris`.
    static func offset(forZone zone: String, at epoch: Int64) -> Int? {
        let z = zone.trimmingWhitespace()
        if z == "UTC" || z == "Z" || z == "GMT" { return 0 }
        let bytes = Array(z.utf8)
        if let first = bytes.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            let digits = bytes.dropFirst().filter { $0 != UInt8(ascii: ":") }
            guard digits.count == 4 || digits.count == 2, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return nil
            }
            let n = digits.map { Int($0 - 0x30) }
            let h = n[0] * 10 + n[1]
            let m = n.count == 4 ? n[2] * 10 + n[3] : 0
            guard h <= 14, m < 60 else { return nil }
            return (first == UInt8(ascii: "-") ? -1 : 1) * (h * 3600 + m * 60)
        }
        guard let tz = TimeZone(identifier: z) else { return nil }
        return tz.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(epoch)))
    }

    private static func pad(_ v: Int, _ width: Int = 2) -> String {
        var s = String(v)
        while s.count < width { s = "0" + s }
        return s
    }

    /// Presets `iso`, `date`, `time`, `short`, `long`, `datetime`, or a strftime pattern
    /// (`%Y %y %m %d %e %H %I %M %S %p %b %B %a %A %Z %%`).
    func format(_ pattern: String) -> String {
        switch pattern {
        case "iso": return format("%Y-%m-%dT%H:%M:%S") + (offsetSeconds == 0 ? "Z" : zoneText(colon: true))
        case "date": return format("%Y-%m-%d")
        case "time": return format("%H:%M")
        case "short": return format("%b %e, %Y")
        case "long": return format("%B %e, %Y")
        case "datetime": return format("%b %e, %Y %H:%M")
        default: break
        }
        let local = epoch + Int64(offsetSeconds)
        let days = Int(local >= 0 ? local / 86400 : (local - 86399) / 86400)
        let secs = Int(local - Int64(days) * 86400)
        let (y, m, d) = Self.civilFromDays(days)
        let weekday = ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday (4)
        let hour = secs / 3600, minute = (secs % 3600) / 60, second = secs % 60
        var out = ""
        var percent = false
        for c in pattern {
            guard percent else {
                if c == "%" { percent = true } else { out.append(c) }
                continue
            }
            percent = false
            switch c {
            case "Y": out += String(y)
            case "y": out += Self.pad(((y % 100) + 100) % 100)
            case "m": out += Self.pad(m)
            case "d": out += Self.pad(d)
            case "e": out += String(d)
            case "H": out += Self.pad(hour)
            case "I": out += Self.pad(hour % 12 == 0 ? 12 : hour % 12)
            case "M": out += Self.pad(minute)
            case "S": out += Self.pad(second)
            case "p": out += hour < 12 ? "AM" : "PM"
            case "b": out += String(Self.monthNames[m - 1].prefix(3))
            case "B": out += Self.monthNames[m - 1]
            case "a": out += String(Self.dayNames[weekday].prefix(3))
            case "A": out += Self.dayNames[weekday]
            case "Z": out += offsetSeconds == 0 ? "UTC" : zoneText(colon: true)
            case "%": out += "%"
            default: out.append("%"); out.append(c)
            }
        }
        if percent { out.append("%") }
        return out
    }

    private func zoneText(colon: Bool) -> String {
        let sign = offsetSeconds < 0 ? "-" : "+"
        let a = Swift.abs(offsetSeconds)
        return sign + Self.pad(a / 3600) + (colon ? ":" : "") + Self.pad((a % 3600) / 60)
    }
}

/// MD5 (RFC 1321), for the `md5` pipe (e.g. Gravatar hashes). Not for security.
enum MD5 {
    private static let s: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                      5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                                      4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                      6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
    private static let k: [UInt32] = (0..<64).map { i in
        UInt32(truncatingIfNeeded: Int64(Swift.abs(sin(Double(i + 1))) * 4294967296.0))
    }

    static func hex(_ message: [UInt8]) -> String {
        var data = message
        let bitLength = UInt64(message.count) &* 8
        data.append(0x80)
        while data.count % 64 != 56 { data.append(0) }
        for i in 0..<8 { data.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }
        var a0: UInt32 = 0x67452301, b0: UInt32 = 0xefcdab89, c0: UInt32 = 0x98badcfe, d0: UInt32 = 0x10325476
        var m = [UInt32](repeating: 0, count: 16)
        for chunk in stride(from: 0, to: data.count, by: 64) {
            for i in 0..<16 {
                let o = chunk + i * 4
                m[i] = UInt32(data[o]) | UInt32(data[o + 1]) << 8 | UInt32(data[o + 2]) << 16 | UInt32(data[o + 3]) << 24
            }
            var a = a0, b = b0, c = c0, d = d0
            for i in 0..<64 {
                var f: UInt32
                let g: Int
                switch i {
                case 0..<16: f = (b & c) | (~b & d); g = i
                case 16..<32: f = (d & b) | (~d & c); g = (5 * i + 1) % 16
                case 32..<48: f = b ^ c ^ d; g = (3 * i + 5) % 16
                default: f = c ^ (b | ~d); g = (7 * i) % 16
                }
                f = f &+ a &+ k[i] &+ m[g]
                a = d; d = c; c = b
                b = b &+ ((f << s[i]) | (f >> (32 - s[i])))
            }
            a0 = a0 &+ a; b0 = b0 &+ b; c0 = c0 &+ c; d0 = d0 &+ d
        }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for word in [a0, b0, c0, d0] {
            for i in 0..<4 {
                let byte = UInt8(truncatingIfNeeded: word >> (8 * UInt32(i)))
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The wall clock, for compile-time checks that compare with now (an `apns-expiration` in the past).
enum WallClock {
    static func epochSeconds() -> Int64 { Int64(Date().timeIntervalSince1970) }
}
