package import NorqCore

extension NorqError.Code {
    /// `norq preview`: a request to the page's JSON API that is not what it takes (not JSON, not an object, an
    /// unknown field, a wrong type) (400).
    package static let previewInvalidRequest: Self = "preview/invalid-request"
    /// `norq preview`: a render request (pasted data) larger than the preview's body limit (413).
    package static let previewBodyTooLarge: Self = "preview/body-too-large"
    /// `norq preview`: more pages are subscribed to live updates than the preview serves at once (503).
    package static let previewTooManyClients: Self = "preview/too-many-clients"
    /// `norq preview`: a request whose `Host` is not a loopback name (`127.0.0.1`, `localhost`, `[::1]`): a page of
    /// another site reaching the preview through DNS rebinding (403).
    package static let previewForbiddenHost: Self = "preview/forbidden-host"
    /// `norq preview` could not listen on 127.0.0.1 at the port asked for (in use, not permitted).
    package static let previewBindFailed: Self = "preview/bind-failed"
}

extension NorqError {
    /// The HTTP status of a preview API error: the request's own mistakes are 4xx; a template that does not
    /// compile or render is not an HTTP error (the page shows it), except an unknown template (404).
    var previewStatus: Int {
        switch code {
        case .previewInvalidRequest, .invalidJSON: 400
        case .previewForbiddenHost: 403
        case .previewBodyTooLarge: 413
        case .previewTooManyClients: 503
        default: 422
        }
    }
}
