// Users (admins only), the user directory and shares: the client of
//   GET /api/users -> {items: [{id,name,email,role,disabled,createdAt,chatAccounts}]}
//   DELETE /api/users/{name}/chat-accounts/{channel}/{platformUserId} -> 204
//   POST /api/users {name,password?,email?,role} -> 201; PATCH /api/users/{name} {role?,disabled?}
//   GET /api/users/directory -> {items: [{id,name}]}
//   GET /api/shares/{kind}/{id} -> {items: [{userId,name,access}]}
//   PUT /api/shares/{kind}/{id}/{userName} {access}; DELETE the same -> 204.
// Errors are thrown as ApiError with the server's detail.
import { request } from "./api";
import type { Role } from "./auth";

export interface UserRow {
  id: string;
  name: string;
  email: string | null;
  role: Role;
  disabled: boolean;
  createdAt: string;
  /** The IM accounts the user linked to themselves (`/link <code>`). */
  chatAccounts?: { channel: string; platformUserId: string }[];
}

export interface NewUser {
  name: string;
  password?: string;
  email?: string;
  role: Role;
}

export type ShareKind = "conversation" | "agent";
export type ShareAccess = "read" | "write";

export interface ShareRow {
  userId: string;
  name: string;
  access: ShareAccess;
}

const enc = encodeURIComponent;

/** The body of POST /api/users: empty optional fields are left out. */
export function newUserBody(name: string, password: string, email: string, role: Role): NewUser {
  const body: NewUser = { name: name.trim(), role };
  if (password) body.password = password;
  if (email.trim()) body.email = email.trim();
  return body;
}

export const usersApi = {
  list(): Promise<{ items: UserRow[] }> {
    return request("GET", "/api/users");
  },
  create(body: NewUser): Promise<unknown> {
    return request("POST", "/api/users", body);
  },
  update(name: string, change: { role?: Role; disabled?: boolean }): Promise<unknown> {
    return request("PATCH", `/api/users/${enc(name)}`, change);
  },
  unlinkChatAccount(name: string, channel: string, platformUserId: string): Promise<void> {
    return request("DELETE", `/api/users/${enc(name)}/chat-accounts/${enc(channel)}/${enc(platformUserId)}`);
  },
  directory(): Promise<{ items: { id: string; name: string }[] }> {
    return request("GET", "/api/users/directory");
  },
  shares(kind: ShareKind, id: string): Promise<{ items: ShareRow[] }> {
    return request("GET", `/api/shares/${kind}/${enc(id)}`);
  },
  share(kind: ShareKind, id: string, userName: string, access: ShareAccess): Promise<unknown> {
    return request("PUT", `/api/shares/${kind}/${enc(id)}/${enc(userName)}`, { access });
  },
  unshare(kind: ShareKind, id: string, userName: string): Promise<void> {
    return request("DELETE", `/api/shares/${kind}/${enc(id)}/${enc(userName)}`);
  },
};
