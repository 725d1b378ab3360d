public import AsyncHTTPClient
public import Foundation
@_exported public import NorqAPI
@_exported public import OpenAPIRuntime  // the client speaks its types (OpenAPIArrayContainer, HTTPBody)
public import HTTPTypes
import OpenAPIAsyncHTTPClient

/// A Swift client of a norq server (`norq serve`), generated from docs/openapi.yaml: every operation of the API is a
/// method of ``api`` taking and returning the spec's types (`Operations`, `Components.Schemas`).
///
/// ```swift
/// let norq = try NorqClient(serverURL: URL(string: "https://norq.internal:8080")!, apiKey: key)
/// let answer = try await norq.api.createSend(body: .json(.init(template: "order-shipped", to: .init(recipients))))
/// let accepted = try answer.accepted.body.json   // 202: the send id and its status URL
/// ```
public struct NorqClient: Sendable {
    /// The generated client: one method per operation of docs/openapi.yaml.
    public let api: Client

    /// - Parameters:
    ///   - serverURL: the server's base URL (scheme, host and port).
    ///   - apiKey: a key of the server's `server.apiKeys`, sent as `Authorization: Bearer <key>`; nil for a server
    ///     started with `--no-auth`.
    ///   - httpClient: the AsyncHTTPClient to send through (default: the shared one).
    ///   - timeout: the deadline of each request.
    public init(serverURL: URL, apiKey: String?, httpClient: HTTPClient = .shared, timeout: Duration = .seconds(60)) {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        let transport = AsyncHTTPClientTransport(configuration: .init(client: httpClient,
                                                                      timeout: .milliseconds(milliseconds)))
        api = Client(serverURL: serverURL, transport: transport,
                     middlewares: apiKey.map { [BearerAuthentication(key: $0)] } ?? [])
    }

    /// The generated client over any transport (for tests, or another HTTP client).
    public init(api: Client) {
        self.api = api
    }
}

/// Adds `Authorization: Bearer <key>` to every request.
public struct BearerAuthentication: ClientMiddleware {
    let value: String

    public init(key: String) {
        value = "Bearer " + key
    }

    public func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                          next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?))
        async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = value
        return try await next(request, body, baseURL)
    }
}
