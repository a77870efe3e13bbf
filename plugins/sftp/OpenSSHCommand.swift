/// The command line of `ssh -s sftp` for `transport: openssh`, built from a step's connection
/// inputs. ssh keeps the first value it obtains for an option and reads the command line before
/// any config file, so the options given here win over `~/.ssh/config`; everything else (ciphers,
/// ProxyJump, certificates, agents, IdentityFile…) comes from the user's config as usual.
enum OpenSSHCommand {
    /// The arguments after `ssh` (no program name).
    static func arguments(_ p: ConnectionParameters) -> [String] {
        var arguments: [String] = []
        if let config = p.sshConfig { arguments += ["-F", config] }
        var options: [String: String] = [
            // Never prompt (no passwords, passphrases or "are you sure" questions): fail instead.
            "BatchMode": "yes",
            // Debug level 1 is the only level that prints the server's host key fingerprint
            // ("Server host key: TYPE SHA256:…"), named in refusals and in sftp.connect's output.
            // Its lines are filtered out of error messages. (ProxyJump's ssh does not inherit it.)
            "LogLevel": "DEBUG1",
            "ConnectTimeout": String(p.connectTimeout),
            "ServerAliveInterval": String(p.keepalive),
            // One TCP connection per ssh process: the ranges of a big file need their own
            // connections (their encryption runs on several cores), so no multiplexing.
            "ControlMaster": "no",
            "ControlPath": "none",
            // Nothing but the sftp subsystem travels on this connection.
            "ForwardAgent": "no",
            "ForwardX11": "no",
            "ClearAllForwardings": "yes",
            "PermitLocalCommand": "no",
            "RemoteCommand": "none",
            "RequestTTY": "no",
            "EscapeChar": "none",
            // Only the step's known_hosts decides (never /etc/ssh/ssh_known_hosts), and ssh does
            // not rewrite it with keys the server announces later.
            "GlobalKnownHostsFile": "/dev/null",
            "UpdateHostKeys": "no",
            "CheckHostIP": "no",
        ]
        switch p.policy {
        case .strict:
            options["StrictHostKeyChecking"] = "yes"
            options["UserKnownHostsFile"] = quoted(p.knownHosts)
        case .acceptNew:
            options["StrictHostKeyChecking"] = "accept-new"
            options["UserKnownHostsFile"] = quoted(p.knownHosts)
        case .off:
            options["StrictHostKeyChecking"] = "no"
            options["UserKnownHostsFile"] = "/dev/null"
        }
        if p.keyFile != nil && !p.agent {
            // The step names its key: do not offer the agent's or the default keys first (a
            // server refuses after MaxAuthTries offers).
            options["IdentitiesOnly"] = "yes"
        }
        for (name, value) in options.sorted(by: { $0.key < $1.key }) { arguments += ["-o", "\(name)=\(value)"] }
        arguments += ["-p", String(p.port), "-l", p.user]
        if let keyFile = p.keyFile { arguments += ["-i", keyFile] }
        if let jump = p.proxyJump { arguments += ["-J", jump] }
        // -T: no terminal; -s: the last argument is a subsystem; `--` so that no host name is
        // taken for an option.
        arguments += ["-T", "-s", "--", p.host, "sftp"]
        return arguments
    }

    /// ssh splits option values at spaces unless quoted.
    private static func quoted(_ path: String) -> String {
        path.contains(where: { $0 == " " || $0 == "\t" }) ? "\"\(path)\"" : path
    }
}
