/// A self-signed client certificate (P-256, CN "Apple Push Services: com.example.app") for unit tests
/// that only need certificate material to load; end-to-end tests use the emulator's certificates.
enum TestCertificates {
    static let certificatePEM = """
-----BEGIN CERTIFICATE-----
MIIB9zCCAZ2gAwIBAgIUMdvjkzpjVYQM846ghHOvuPXbIrQwCgYIKoZIzj0EAwIw
UDEtMCsGA1UEAwwkQXBwbGUgUHVzaCBTZXJ2aWNlczogY29tLmV4YW1wbGUuYXBw
MR8wHQYKCZImiZPyLGQBAQwPY29tLmV4YW1wbGUuYXBwMCAXDTI2MTEyMTIwMDQ0
OVoYDzIxMjYxMDI4MjAwNDQ5WjBQMS0wKwYDVQQDDCRBcHBsZSBQdXNoIFNlcnZp
Y2VzOiBjb20uZXhhbXBsZS5hcHAxHzAdBgoJkiaJk/IsZAEBDA9jb20uZXhhbXBs
ZS5hcHAwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARUC5q6ZFGvXPQvwiQSvzAe
DvxYZzeFpcxEN2ADzYA9Y9Q+GlBtl724aNxs5yYB4bG2NfpwQETxegSBOs3a5qn4
o1MwUTAdBgNVHQ4EFgQUe7FqTAo9NKWCrA4wIJ+aFn6r/TMwHwYDVR0jBBgwFoAU
e7FqTAo9NKWCrA4wIJ+aFn6r/TMwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNIADBFAiEAkpOsf0Eg/C6TOamwQ6+mebfs2L0Wo2Kr078nLRqboKwCICxMIWp8
tzNP5a3pHLGwrPZutM4PBdhA7e8HlswIa+9z
-----END CERTIFICATE-----
"""

    static let keyPEM = """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgmhQ9SQOzI1EDd5Tv
kzLQTArCK9CaxvtH2oMJhDKfYY+hRANCAARUC5q6ZFGvXPQvwiQSvzAeDvxYZzeF
pcxEN2ADzYA9Y9Q+GlBtl724aNxs5yYB4bG2NfpwQETxegSBOs3a5qn4
-----END PRIVATE KEY-----
"""
}
