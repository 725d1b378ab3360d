import NorqCore
import Synchronization

/// A shared, thread-safe walk over the targets of a recipient list in `forEachTarget` order (each recipient's
/// tokens, then its channels), handing each target with its position to exactly one caller.
final class TargetCursor: Sendable {
    private struct Position {
        var recipient = 0
        var index = 0
        var position = 0
    }

    private let recipients: [Recipient]
    private let state = Mutex(Position())
    /// The number of targets in all recipients.
    let count: Int

    init(_ recipients: [Recipient]) {
        self.recipients = recipients
        self.count = NotificationRouter.targetCount(recipients)
    }

    /// The next target, its position and its recipient's id; nil once every target was handed out.
    func next() -> (Int, DeliveryTarget, String?)? {
        state.withLock { s in
            // The recipient is read in place (a copy of it retained its arrays and id per target).
            while s.recipient < recipients.count {
                let tokens = recipients[s.recipient].tokens.count
                if s.index < tokens + recipients[s.recipient].channels.count {
                    let target: DeliveryTarget = s.index < tokens
                        ? .token(recipients[s.recipient].tokens[s.index])
                        : .channel(recipients[s.recipient].channels[s.index - tokens])
                    let position = s.position
                    let id = recipients[s.recipient].id
                    s.index += 1
                    s.position += 1
                    return (position, target, id)
                }
                s.recipient += 1
                s.index = 0
            }
            return nil
        }
    }
}
