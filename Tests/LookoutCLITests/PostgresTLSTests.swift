import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// TLS to PostgreSQL against a real server started by the test with `ssl = on` and certificates made by the
/// test with `openssl`: a certificate authority, the server's certificate (for the name `localhost` only), a
/// client certificate, and a second authority that signed none of them. pg_hba.conf takes encrypted
/// connections only (`hostssl`), and the database `certified` only with a client certificate (`cert`).
@Suite(.serialized) struct PostgresTLSTests {
    final class Certificates {
        let folder: String
        var authority: String { folder + "/ca.crt" }
        var otherAuthority: String { folder + "/other-ca.crt" }
        var clientCertificate: String { folder + "/client.crt" }
        var clientKey: String { folder + "/client.key" }

        init() throws {
            folder = try CLI.scratch("tls")
            func openssl(_ arguments: String) throws {
                let (status, _, err) = try TestPostgres.shell(["sh", "-c", "cd '\(folder)' && openssl \(arguments)"])
                guard status == 0 else { throw TestFailure("openssl \(arguments): \(err)") }
            }
            for name in ["ca", "other-ca"] {
                try openssl(
                    "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=\(name) -keyout \(name).key -out \(name).crt")
            }
            try openssl("req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr")
            try "subjectAltName = DNS:localhost\n".write(
                toFile: folder + "/server.ext", atomically: true, encoding: .utf8)
            try openssl(
                "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt"
            )
            try openssl("req -newkey rsa:2048 -nodes -subj /CN=lookout -keyout client.key -out client.csr")
            try openssl("x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out client.crt")
            // The server reads its key as its own user, and refuses a key others can read.
            chmod(folder, 0o755)
            chmod(folder + "/server.key", 0o600)
            if getuid() == 0 { try TestPostgres.shell(["chown", "postgres", folder + "/server.key"]) }
        }

        deinit { CLI.remove(folder) }
    }

    /// A server that takes encrypted connections only; `certified` also wants a client certificate.
    func tlsServer(_ certificates: Certificates) throws -> TestPostgres {
        let server = try TestPostgres()
        try server.sql("CREATE DATABASE certified")
        for setting in [
            "ssl = on", "ssl_cert_file = '\(certificates.folder)/server.crt'",
            "ssl_key_file = '\(certificates.folder)/server.key'", "ssl_ca_file = '\(certificates.authority)'",
        ] {
            try server.sql("ALTER SYSTEM SET \(setting)")
        }
        let hba = try server.sql("SHOW hba_file")
        let rules = """
            local all all trust
            hostssl certified all 127.0.0.1/32 cert
            hostssl all all 127.0.0.1/32 trust

            """
        let (status, _, err) = try TestPostgres.shell(["sh", "-c", "printf '%s' \"$0\" > '\(hba)'", rules])
        guard status == 0 else { throw TestFailure("pg_hba.conf: \(err)") }
        try server.restart()
        return server
    }

    /// `url` with the host replaced by `host` and `options` appended.
    func address(
        _ server: TestPostgres, host: String = "127.0.0.1", database: String = "photos", _ options: String
    )
        -> String
    {
        let port = server.url.split(separator: ":").last!.split(separator: "/").first!
        return "postgresql://lookout@\(host):\(port)/\(database)?\(options)"
    }

    @Test func encryptedConnections() throws {
        let certificates = try Certificates()
        let server = try tlsServer(certificates)
        let photos = try CLI.scratch("tls-photos")
        defer { CLI.remove(photos) }
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: photos + "/scene-0001.jpg")

        // Indexing and searching over sslmode=require (encrypted, the certificate not checked).
        let required = address(server, "sslmode=require")
        let indexed = try CLI.run(["index", photos, "--db", required, "--imgsz", "320", "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let search = try CLI.run(["search", "green circle", "--db", required, "--json", "--conf", "0.01"])
        #expect(search.status == 0 && search.stdout.contains("scene-0001.jpg"), "\(search.stderr)")
        let status = try CLI.run(["index", "--status", "--db", required])
        #expect(status.status == 0 && status.stdout.contains("sslmode=require: encrypted (TLSv1."), "\(status.stdout)")
        // The server's own view: an encrypted backend for Lookout.
        #expect(try server.count("SELECT count(*) FROM lookout.images") == 1)

        // The default (prefer) encrypts when the server offers TLS; so does $PGSSLMODE's mode.
        let preferred = try CLI.run(["index", "--status", "--db", server.url])
        #expect(preferred.stdout.contains("sslmode=prefer: encrypted (TLSv1."), "\(preferred.stdout)")
        let fromEnvironment = try CLI.run(
            ["index", "--status", "--db", server.url],
            environment: ["PGSSLMODE": "verify-ca", "PGSSLROOTCERT": certificates.authority])
        #expect(
            fromEnvironment.stdout.contains("sslmode=verify-ca: encrypted (TLSv1.")
                && fromEnvironment.stdout.contains("the certificate verified (not the host name)"),
            "\(fromEnvironment.stdout) \(fromEnvironment.stderr)")

        // verify-full against the right authority and the certificate's host name.
        let full = try CLI.run([
            "index", "--status", "--db",
            address(server, host: "localhost", "sslmode=verify-full&sslrootcert=\(certificates.authority)"),
        ])
        #expect(
            full.status == 0 && full.stdout.contains("sslmode=verify-full: encrypted (TLSv1.")
                && full.stdout.contains("the certificate verified for host localhost"), "\(full.stdout) \(full.stderr)")
        // A wrong authority, and a host name the certificate does not list: clear errors naming the host.
        let wrongAuthority = try CLI.run([
            "index", "--status", "--db",
            address(server, host: "localhost", "sslmode=verify-full&sslrootcert=\(certificates.otherAuthority)"),
        ])
        #expect(
            wrongAuthority.status != 0
                && wrongAuthority.stderr.contains("the certificate of the server at localhost did not verify against")
                && wrongAuthority.stderr.contains(certificates.otherAuthority), "\(wrongAuthority.stderr)")
        let wrongHost = try CLI.run([
            "index", "--status", "--db", address(server, "sslmode=verify-full&sslrootcert=\(certificates.authority)"),
        ])
        #expect(
            wrongHost.status != 0 && wrongHost.stderr.contains("the server's certificate is not for host 127.0.0.1"),
            "\(wrongHost.stderr)")
        // require with a root certificate checks the authority, as libpq does.
        let requireChecked = try CLI.run([
            "index", "--status", "--db", address(server, "sslmode=require&sslrootcert=\(certificates.otherAuthority)"),
        ])
        #expect(
            requireChecked.status != 0 && requireChecked.stderr.contains("did not verify"), "\(requireChecked.stderr)")
        // verify-full without any root certificate says what it needs.
        let noRoot = try CLI.run(["index", "--status", "--db", address(server, "sslmode=verify-full")])
        #expect(noRoot.status != 0 && noRoot.stderr.contains("sslrootcert=FILE"), "\(noRoot.stderr)")

        // sslmode=disable against a server that takes encrypted connections only.
        let plain = try CLI.run(["index", "--status", "--db", address(server, "sslmode=disable")])
        #expect(
            plain.status != 0 && plain.stderr.contains("the server accepts only encrypted connections"),
            "\(plain.stderr)")
        // allow: plain refused, so encrypted.
        let allowed = try CLI.run(["index", "--status", "--db", address(server, "sslmode=allow")])
        #expect(allowed.stdout.contains("sslmode=allow: encrypted (TLSv1."), "\(allowed.stdout) \(allowed.stderr)")

        // A database that wants a client certificate: refused without one, taken with one (signed by the CA,
        // its common name the user's).
        let certified = "sslmode=verify-full&sslrootcert=\(certificates.authority)"
        let anonymous = try CLI.run([
            "index", photos, "--db", address(server, host: "localhost", database: "certified", certified),
            "--imgsz", "320", "--plain",
        ])
        #expect(anonymous.status != 0 && anonymous.stderr.contains("cannot connect"), "\(anonymous.stderr)")
        let withCertificate = try CLI.run([
            "index", photos, "--db",
            address(
                server, host: "localhost", database: "certified",
                certified + "&sslcert=\(certificates.clientCertificate)&sslkey=\(certificates.clientKey)"),
            "--imgsz", "320", "--plain",
        ])
        #expect(withCertificate.status == 0, "\(withCertificate.stderr)")
        // A key file that is not a key.
        let badKey = try CLI.run([
            "index", "--status", "--db",
            address(
                server, "sslmode=require&sslcert=\(certificates.clientCertificate)&sslkey=\(certificates.authority)"),
        ])
        #expect(badKey.status != 0 && badKey.stderr.contains("holds no PEM private key"), "\(badKey.stderr)")
    }

    @Test func aServerWithoutTLS() throws {
        let server = try TestPostgres()
        // prefer (the default) falls back to a plain connection; require refuses it with a sentence.
        let photos = try CLI.scratch("tls-plain")
        defer { CLI.remove(photos) }
        try FileManager.default.copyItem(
            atPath: CLI.root + "/examples/scenes/scene-0001.jpg", toPath: photos + "/scene-0001.jpg")
        let indexed = try CLI.run(["index", photos, "--db", server.url, "--imgsz", "320", "--plain"])
        #expect(indexed.status == 0, "\(indexed.stderr)")
        let status = try CLI.run(["index", "--status", "--db", server.url])
        #expect(status.stdout.contains("sslmode=prefer: not encrypted"), "\(status.stdout)")
        let required = try CLI.run(["index", "--status", "--db", address(server, "sslmode=require")])
        #expect(
            required.status != 0 && required.stderr.contains("does not offer TLS, and sslmode=require requires it"),
            "\(required.stderr)")
        let unknown = try CLI.run(["index", "--status", "--db", address(server, "sslmode=sometimes")])
        #expect(unknown.status != 0 && unknown.stderr.contains("sslmode=sometimes is not one of"), "\(unknown.stderr)")
    }
}
