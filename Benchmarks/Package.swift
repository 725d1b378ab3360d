// swift-tools-version: 6.1
import PackageDescription

// A separate package so that the root package's build and CI stay light: build it with
// `swift build -c release --package-path Benchmarks`.
let package = Package(
    name: "norq-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "norq-swift", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // Options, measurement, the router and render benchmarks, shared by the executables.
        .target(
            name: "BenchSupport",
            dependencies: [
                .product(name: "Norq", package: "norq-swift"),
                .product(name: "NorqCore", package: "norq-swift"),
                .product(name: "NorqAPNs", package: "norq-swift"),
                .product(name: "NorqTemplates", package: "norq-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // Web Push mode (issue 16).
                .product(name: "NorqWebPush", package: "norq-swift"),
                .product(name: "NorqFCM", package: "norq-swift"),
                // Expo mode (issue 31).
                .product(name: "NorqExpo", package: "norq-swift"),
                // FCM mode: latencies from the router's own delivery-duration metric.
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The router: its process holds what an application using Norq holds, and no other HTTP client and no
        // delivery store (an application without `store:` links neither SQLite nor PostgreSQL).
        .executableTarget(name: "norq-bench", dependencies: ["BenchSupport"]),
        // The durable modes (issue 18) and the stores they measure, in a process of their own.
        .target(
            name: "DurableBench",
            dependencies: [
                "BenchSupport",
                .product(name: "Norq", package: "norq-swift"),
                .product(name: "NorqAPNs", package: "norq-swift"),
                .product(name: "NorqCore", package: "norq-swift"),
                .product(name: "NorqStore", package: "norq-swift"),
                .product(name: "NorqStoreSQLite", package: "norq-swift"),
                .product(name: "NorqStorePostgres", package: "norq-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "norq-bench-durable", dependencies: ["BenchSupport", "DurableBench"]),
        // The plain AsyncHTTPClient loop, a peer, in a process of its own.
        .executableTarget(
            name: "norq-bench-ahc",
            dependencies: [
                "BenchSupport",
                .product(name: "NorqCore", package: "norq-swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The command line and life of the server processes below.
        .target(name: "BenchServer"),
        .executableTarget(
            name: "norq-bench-emulator",
            dependencies: [
                "BenchServer",
                .product(name: "NorqTesting", package: "norq-swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The FCM emulator for fcm.sh, in a process of its own.
        .executableTarget(
            name: "norq-bench-fcm-emulator",
            dependencies: ["BenchServer", .product(name: "NorqTesting", package: "norq-swift")]
        ),
        // The Expo sink for expo.sh (tickets as many as recipients), in a process of its own.
        .executableTarget(
            name: "norq-bench-expo-sink",
            dependencies: [
                "BenchServer",
                .product(name: "NorqTesting", package: "norq-swift"),
                .product(name: "NorqZlib", package: "norq-swift"),
                // The HTTP/1.1 side for the Python exponent-server-sdk (HTTP1TicketServer).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // `norq serve` load generator (Benchmarks/serve.sh): raw HTTP/1.1 keep-alive clients on NIO only.
        .executableTarget(
            name: "norq-serve-load",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ]
)
