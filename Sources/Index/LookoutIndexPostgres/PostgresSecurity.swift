import LookoutStore
import NIOSSL

#if canImport(Glibc)
    import Glibc
#endif

/// How a connection to PostgreSQL is encrypted and whom it trusts: libpq's `sslmode`, `sslrootcert`, `sslcert`
/// and `sslkey`, read as libpq reads them — from the URL's options, else `$PGSSLMODE`, `$PGSSLROOTCERT`,
/// `$PGSSLCERT` and `$PGSSLKEY`, else `~/.postgresql/root.crt`, `postgresql.crt` and `postgresql.key` where
/// those files exist. The default mode is libpq's, `prefer`.
///
/// | mode | encrypted | the server's certificate |
/// |---|---|---|
/// | `disable` | never | — |
/// | `allow` | only if the server refuses a plain connection | not checked |
/// | `prefer` | whenever the server offers TLS | not checked |
/// | `require` | always | not checked, unless a root certificate is given (then as `verify-ca`, as libpq does) |
/// | `verify-ca` | always | signed by the root certificate |
/// | `verify-full` | always | signed by the root certificate, and for the host connected to |
///
/// `sslrootcert=system` trusts the system's certificate authorities (Debian's `ca-certificates`).
public struct PostgresSecurity: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var mode: Mode
    /// The certificate authorities trusted for the server's certificate (a PEM file, or `system`).
    public var rootCertificate: String?
    /// The client's certificate (PEM) and its private key (PEM), for servers that ask for one.
    public var certificate: String?
    public var key: String?

    public init(mode: Mode = .prefer, rootCertificate: String? = nil, certificate: String? = nil, key: String? = nil) {
        self.mode = mode
        self.rootCertificate = rootCertificate
        self.certificate = certificate
        self.key = key
    }

    /// The URL options this type reads.
    static let optionNames = ["sslmode", "sslrootcert", "sslcert", "sslkey"]

    /// Settings from the URL's `options` (name → value), then the environment, then the files in
    /// `~/.postgresql` that exist.
    init(
        options: [String: String], environment: (String) -> String?, fileExists: (String) -> Bool,
        fail: (String) -> IndexError
    ) throws(IndexError) {
        let modeText = options["sslmode"] ?? environment("PGSSLMODE").flatMap { $0.isEmpty ? nil : $0 } ?? "prefer"
        guard let mode = Mode(rawValue: modeText) else {
            throw fail(
                "sslmode=\(modeText) is not one of \(Mode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let home = environment("HOME").map { $0 + "/.postgresql/" }
        func setting(_ option: String, _ variable: String, _ file: String) -> String? {
            if let value = options[option] ?? environment(variable), !value.isEmpty { return value }
            if let home, fileExists(home + file) { return home + file }
            return nil
        }
        self.init(
            mode: mode, rootCertificate: setting("sslrootcert", "PGSSLROOTCERT", "root.crt"),
            certificate: setting("sslcert", "PGSSLCERT", "postgresql.crt"),
            key: setting("sslkey", "PGSSLKEY", "postgresql.key"))
        if mode == .disable { return }
        if certificate != nil && key == nil {
            throw fail("sslcert=\(certificate!) needs its private key: sslkey=FILE (or ~/.postgresql/postgresql.key)")
        }
        if (mode == .verifyCA || mode == .verifyFull) && rootCertificate == nil {
            throw fail(
                "sslmode=\(mode.rawValue) checks the server's certificate against a certificate authority: give it "
                    + "with sslrootcert=FILE (or ~/.postgresql/root.crt, $PGSSLROOTCERT), or sslrootcert=system for "
                    + "the system's authorities")
        }
    }

    /// Whether the server's certificate is checked: against the root certificate (`verify-ca`, and `require`
    /// with a root certificate, as libpq does), and also for the host name (`verify-full`).
    public var verifiesCertificate: Bool {
        mode == .verifyCA || mode == .verifyFull || (mode == .require && rootCertificate != nil)
    }

    public var verifiesHost: Bool { mode == .verifyFull }

    /// The TLS context for a connection, nil for `disable`. Files that cannot be read or are not PEM are
    /// errors naming them.
    func context(host: String) throws(IndexError) -> NIOSSLContext? {
        guard mode != .disable else { return nil }
        func fail(_ problem: String) -> IndexError {
            IndexError(path: host, kind: .noIndex, problem: problem)
        }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification =
            verifiesHost ? .fullVerification : verifiesCertificate ? .noHostnameVerification : .none
        if verifiesCertificate, let root = rootCertificate {
            if root == "system" {
                configuration.trustRoots = .default
            } else {
                guard access(root, R_OK) == 0 else { throw fail("sslrootcert \(root) cannot be read") }
                do {
                    configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(root))
                } catch {
                    throw fail("sslrootcert \(root) holds no PEM certificate")
                }
            }
        }
        if let certificate, let key {
            guard access(certificate, R_OK) == 0 else { throw fail("sslcert \(certificate) cannot be read") }
            guard access(key, R_OK) == 0 else { throw fail("sslkey \(key) cannot be read") }
            do {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map {
                    .certificate($0)
                }
            } catch {
                throw fail("sslcert \(certificate) holds no PEM certificate")
            }
            do {
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            } catch {
                throw fail("sslkey \(key) holds no PEM private key (an encrypted key is not supported)")
            }
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw fail("the TLS settings are not usable: \(error)")
        }
    }

    /// A sentence on what a failed connection's TLS error means, nil when `error` is not about TLS.
    /// `text`: the error with what it wraps, in words.
    static func explain(_ text: String, host: String, security: PostgresSecurity) -> String? {
        if text.contains("failedToValidateHostname") {
            return "the server's certificate is not for host \(host) (sslmode=verify-full checks the host name; "
                + "connect by a name the certificate lists, or use sslmode=verify-ca)"
        }
        if text.contains("CERTIFICATE_VERIFY_FAILED") || text.contains("certificate verify failed") {
            return "the certificate of the server at \(host) did not verify against "
                + "\(security.rootCertificate == "system" ? "the system's certificate authorities" : "sslrootcert \(security.rootCertificate ?? "?")")"
                + " (sslmode=\(security.mode.rawValue))"
        }
        if text.contains("sslUnsupported") {
            return "the server at \(host) does not offer TLS, and sslmode=\(security.mode.rawValue) requires it "
                + "(ssl = on in its postgresql.conf; or sslmode=prefer to accept a plain connection)"
        }
        if text.contains("handshakeFailed") {
            return "TLS with the server at \(host) failed: \(text)"
        }
        return nil
    }
}
