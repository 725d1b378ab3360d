public import NorqCore

extension APNsProvider {
    /// The request's `apns-collapse-id`: a push with one replaces an earlier one with the same id on the device, so
    /// the router may send it again after a failure that APNs may have processed (`retry.ambiguous: collapsible`).
    public func collapseID(of request: PreparedRequest) -> String? {
        request.header("apns-collapse-id")
    }
}
