// Pure helpers over the server's message tree: which branch the UI shows, how multi-model
// answers group into columns, and what useChat is seeded with. No I/O, no React.
import type { UIMessage } from "ai";
import type { ServerMessage } from "./api";

/**
 * The current path: from the root to `leafId` (the branch chosen on the server), or else to the
 * most recently created message (the latest branch), following `parentId`. `messages` is in
 * creation order. Unknown parents end the walk.
 */
export function currentPath(messages: ServerMessage[], leafId: string | null = null): ServerMessage[] {
  if (messages.length === 0) return [];
  const byId = new Map(messages.map((m) => [m.id, m]));
  const path: ServerMessage[] = [];
  const seen = new Set<string>();
  let node: ServerMessage | undefined = (leafId ? byId.get(leafId) : undefined) ?? messages[messages.length - 1];
  while (node && !seen.has(node.id)) {
    seen.add(node.id);
    path.push(node);
    node = node.parentId == null ? undefined : byId.get(node.parentId);
  }
  return path.reverse();
}

/** Multi-model siblings: assistant messages with the same parent and the same group id. */
export function siblingsOf(message: ServerMessage, messages: ServerMessage[]): ServerMessage[] {
  if (message.role !== "assistant" || message.siblingsGroupId == null) return [message];
  return messages.filter(
    (m) =>
      m.role === "assistant" &&
      m.parentId === message.parentId &&
      m.siblingsGroupId === message.siblingsGroupId,
  );
}

/**
 * The messages the chat view shows, in order: the current path where each multi-model answer
 * is expanded to all its siblings (in creation order). `pending` assistant messages (the live
 * ones) are kept so they hold their place; `toUIMessages` turns them into empty placeholders.
 */
export function visibleMessages(messages: ServerMessage[], leafId: string | null = null): ServerMessage[] {
  const out: ServerMessage[] = [];
  const added = new Set<string>();
  for (const node of currentPath(messages, leafId)) {
    for (const m of siblingsOf(node, messages)) {
      if (added.has(m.id)) continue;
      added.add(m.id);
      out.push(m);
    }
  }
  return out;
}

/** True when the tree holds a live (pending) assistant message on the current path. */
export function hasPendingAnswer(messages: ServerMessage[]): boolean {
  const path = currentPath(messages);
  return path.some((node) =>
    siblingsOf(node, messages).some((m) => m.role === "assistant" && m.status === "pending"),
  );
}

/** What the UI needs to know about a message that useChat's UIMessage does not carry. */
export interface MessageInfo {
  parentId: string | null;
  status: ServerMessage["status"];
  modelId: string | null;
  siblingsGroupId: string | number | null;
}

/** Metadata marking a live answer's stand-in: the DB's partial parts are never rendered. */
const PLACEHOLDER = "drupePlaceholder";

export function isPlaceholder(message: UIMessage): boolean {
  const meta = message.metadata;
  return !!meta && typeof meta === "object" && (meta as Record<string, unknown>)[PLACEHOLDER] === true;
}

/**
 * UIMessages for useChat. A `pending` assistant message becomes an empty placeholder: the
 * resumed stream renders the live answer (in place when its `start` chunk reuses the id).
 */
export function toUIMessages(messages: ServerMessage[]): UIMessage[] {
  return messages.map((m) => {
    if (m.role === "assistant" && m.status === "pending") {
      return { id: m.id, role: m.role, parts: [], metadata: { [PLACEHOLDER]: true } };
    }
    const ui: UIMessage = { id: m.id, role: m.role, parts: m.parts ?? [] };
    if (m.metadata != null) ui.metadata = m.metadata;
    return ui;
  });
}

export function infoById(messages: ServerMessage[]): Map<string, MessageInfo> {
  return new Map(
    messages.map((m) => [
      m.id,
      {
        parentId: m.parentId,
        status: m.status,
        modelId: m.modelId,
        siblingsGroupId: m.siblingsGroupId,
      },
    ]),
  );
}

export type DisplayItem =
  | { kind: "single"; message: UIMessage; standInFor?: string }
  | { kind: "group"; key: string; messages: UIMessage[] }
  | { kind: "live-columns" };

/**
 * Puts live answers where they belong. A live answer streamed by useChat under an id the tree
 * does not know takes the place of the first unfilled placeholder (so a queued steer stays
 * after the answer it followed). With `multiLive` (the live turn is rendered as columns from
 * the events endpoint), placeholders and useChat's live copies are dropped and one
 * `live-columns` item stands where the first placeholder was (or at the end).
 */
export function arrangeForDisplay(
  messages: UIMessage[],
  info: ReadonlyMap<string, MessageInfo>,
  multiLive: boolean,
): DisplayItem[] {
  const isLive = (m: UIMessage) => m.role === "assistant" && !info.has(m.id);
  if (multiLive) {
    // The columns show every execution of the live turn (finished ones too): drop the turn's
    // answers from the list, i.e. the sibling groups holding a pending answer.
    const groupKey = (m: UIMessage) => {
      const meta = info.get(m.id);
      return meta && m.role === "assistant" ? `${meta.parentId ?? ""}|${meta.siblingsGroupId ?? m.id}` : null;
    };
    const liveGroups = new Set(
      messages
        .filter((m) => isPlaceholder(m) || info.get(m.id)?.status === "pending")
        .map(groupKey)
        .filter((k): k is string => k != null),
    );
    const kept: UIMessage[] = [];
    let at = -1;
    for (const m of messages) {
      const key = groupKey(m);
      if (isLive(m) || (key != null && liveGroups.has(key))) {
        if (!isLive(m) && at < 0) at = kept.length;
        continue;
      }
      kept.push(m);
    }
    const items = groupForDisplay(kept, info);
    // map the message index to the item index
    let itemAt = items.length;
    if (at >= 0 && at < kept.length) {
      const id = kept[at].id;
      itemAt = items.findIndex((it) =>
        it.kind === "single" ? it.message.id === id : it.kind === "group" && it.messages.some((x) => x.id === id),
      );
    }
    items.splice(itemAt < 0 ? items.length : itemAt, 0, { kind: "live-columns" });
    return items;
  }
  const live = messages.filter(isLive);
  const standIns = new Map<string, string>(); // live id -> placeholder id
  const arranged: UIMessage[] = [];
  for (const m of messages) {
    if (isLive(m)) continue;
    if (isPlaceholder(m)) {
      const replacement = live.find((l) => !standIns.has(l.id));
      if (replacement) {
        standIns.set(replacement.id, m.id);
        arranged.push(replacement);
        continue;
      }
    }
    arranged.push(m);
  }
  for (const l of live) if (!standIns.has(l.id)) arranged.push(l);
  return groupForDisplay(arranged, info).map((item) =>
    item.kind === "single" && standIns.has(item.message.id)
      ? { ...item, standInFor: standIns.get(item.message.id) }
      : item,
  );
}

/**
 * Groups consecutive assistant messages of one multi-model answer (same parent, same sibling
 * group) into one item, rendered as side-by-side columns. Everything else stays single.
 */
export function groupForDisplay(
  messages: UIMessage[],
  info: ReadonlyMap<string, MessageInfo>,
): DisplayItem[] {
  const items: DisplayItem[] = [];
  let group: UIMessage[] = [];
  let groupKey: string | null = null;
  const flush = () => {
    if (group.length > 1 && groupKey != null) {
      items.push({ kind: "group", key: groupKey, messages: group });
    } else {
      for (const m of group) items.push({ kind: "single", message: m });
    }
    group = [];
    groupKey = null;
  };
  for (const m of messages) {
    const meta = info.get(m.id);
    const key =
      m.role === "assistant" && meta && meta.siblingsGroupId != null
        ? `${meta.parentId ?? ""}|${meta.siblingsGroupId}`
        : null;
    if (key != null && key === groupKey) {
      group.push(m);
      continue;
    }
    flush();
    if (key != null) {
      group = [m];
      groupKey = key;
    } else {
      items.push({ kind: "single", message: m });
    }
  }
  flush();
  return items;
}

/** The last user message of a list (the only one the server reads from a submit). */
export function lastUserMessage(messages: UIMessage[]): UIMessage | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "user") return messages[i];
  }
  return undefined;
}

/**
 * The assistant messages a regenerate replaces: the trailing answer, or all columns of a
 * trailing multi-model answer. Empty when the conversation does not end with an answer.
 */
export function trailingAnswer(
  messages: UIMessage[],
  info: ReadonlyMap<string, MessageInfo>,
): UIMessage[] {
  const items = groupForDisplay(messages, info);
  const last = items[items.length - 1];
  if (!last || last.kind === "live-columns") return [];
  const answer = last.kind === "group" ? last.messages : [last.message];
  if (answer.some((m) => m.role !== "assistant" || isPlaceholder(m))) return [];
  return answer;
}

/** Plain text of a message (for titles and copy). */
export function messageText(message: Pick<UIMessage, "parts">): string {
  return message.parts
    .map((p) => (p.type === "text" ? p.text : ""))
    .join("")
    .trim();
}

/**
 * The messages to hand to useChat after re-reading the tree. While the tree still holds live
 * (pending) answers, what this tab already streamed for them is kept instead of an empty
 * placeholder, so a re-read that races the end of a stream does not blank the answer:
 * - a local message with the placeholder's id replaces it;
 * - live messages under ids the tree does not know are kept at the end (one per remaining
 *   placeholder), where `arrangeForDisplay` puts them back in the placeholder's place.
 */
export function mergeLocalLive(
  fromTree: UIMessage[],
  local: UIMessage[],
  localInfo: ReadonlyMap<string, MessageInfo>,
): UIMessage[] {
  const localById = new Map(local.map((m) => [m.id, m]));
  let open = 0;
  const merged = fromTree.map((m) => {
    if (!isPlaceholder(m)) return m;
    const mine = localById.get(m.id);
    if (mine && !isPlaceholder(mine) && mine.parts.length > 0) return mine;
    open += 1;
    return m;
  });
  if (open === 0) return merged;
  const treeIds = new Set(fromTree.map((m) => m.id));
  const live = local.filter(
    (m) =>
      m.role === "assistant" &&
      !isPlaceholder(m) &&
      !localInfo.has(m.id) &&
      !treeIds.has(m.id) &&
      m.parts.length > 0,
  );
  return [...merged, ...live.slice(0, open)];
}

/**
 * The alternatives of a message on the shown path: the messages with the same parent and role
 * (edits of a user message, regenerations of an answer), in creation order, and this message's
 * index among them. Multi-model columns are not navigated (they are shown side by side).
 */
export function branchSiblings(
  message: ServerMessage,
  messages: ServerMessage[],
): { ids: string[]; index: number } {
  if (message.siblingsGroupId != null) return { ids: [message.id], index: 0 };
  const ids = messages
    .filter((m) => m.parentId === message.parentId && m.role === message.role && m.siblingsGroupId == null)
    .map((m) => m.id);
  return { ids, index: ids.indexOf(message.id) };
}
