/// The APNs emulator and test helpers. Depends on NIO only, never on Norq targets.
public enum NorqTesting {}
