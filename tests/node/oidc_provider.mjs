// A real OpenID provider on loopback (`oidc-provider`, OpenID Certified) for
// tests/identity/test_oidc.py.
//
// Protocol (one JSON object a line):
//   1. listens on 127.0.0.1:<ephemeral> and prints {"issuer": "http://127.0.0.1:PORT"};
//   2. reads one line from stdin: {"clients": [...client metadata...],
//      "accounts": {"<login>": {claims}}, "logout": true|false (RP-Initiated Logout, default on)};
//   3. prints {"ready": true} and serves until stdin closes (then exits).
// Logins go through oidc-provider's own development interactions (a login form that accepts
// any login name, then a consent form). An account's claims are those given for its login
// (plus `sub`); an unknown login gets only `sub`. `groups` is released with the `profile` scope.
import http from 'node:http';
import readline from 'node:readline';
import Provider from 'oidc-provider';

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
process.stdout.write(`${JSON.stringify({ issuer })}\n`);

const input = readline.createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
const first = await lines.next();
const { clients, accounts, logout = true } = JSON.parse(first.value);

const provider = new Provider(issuer, {
  clients,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name', 'groups'],
  },
  pkce: { required: () => true },
  // RP-Initiated Logout (end_session_endpoint) unless the test asks for a provider without it.
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: logout } },
  async findAccount(ctx, id) {
    const claims = accounts[id] ?? {};
    return { accountId: id, async claims() { return { ...claims, sub: id }; } };
  },
});
provider.on('server_error', (ctx, err) => process.stderr.write(`server_error ${err.stack}\n`));
server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

// Serve until the test closes stdin.
for await (const _ of lines) { /* ignore further input */ }
server.close();
process.exit(0);
