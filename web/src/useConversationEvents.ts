// Subscribes to a conversation's event stream (EventSource resumes by Last-Event-ID by itself)
// and exposes its status and the executions of the live turn, each folded into a UIMessage.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, type ConversationStatus } from "./api";
import { compareAttempts, ExecutionFolder, parseEvent, type ExecutionView } from "./events";

export interface ConversationEvents {
  /** Latest status seen on the stream (null before the first status event). */
  status: ConversationStatus | null;
  /** Bumped on every status event, so equal statuses still re-trigger effects. */
  statusTick: number;
  turnId: string | null;
  /** Executions of the current turn, in order of first appearance. */
  executions: ExecutionView[];
  connected: boolean;
  /** Forget the executions (after the finished turn was re-read from the database). */
  clearExecutions: () => void;
}

export function useConversationEvents(conversationId: string): ConversationEvents {
  const [status, setStatus] = useState<ConversationStatus | null>(null);
  const [statusTick, setStatusTick] = useState(0);
  const [turnId, setTurnId] = useState<string | null>(null);
  const [executions, setExecutions] = useState<ExecutionView[]>([]);
  const [connected, setConnected] = useState(false);
  const folders = useRef(new Map<string, ExecutionFolder>());
  const order = useRef<string[]>([]);
  const turnRef = useRef<string | null>(null);

  const publish = useCallback(() => {
    setExecutions(order.current.flatMap((id) => {
      const f = folders.current.get(id);
      return f ? [f.view] : [];
    }));
  }, []);

  const clearExecutions = useCallback(() => {
    for (const f of folders.current.values()) f.close();
    folders.current.clear();
    order.current = [];
    setExecutions([]);
  }, []);

  useEffect(() => {
    if (typeof EventSource === "undefined") return;
    const source = new EventSource(api.eventsUrl(conversationId));
    source.onopen = () => setConnected(true);
    source.onerror = () => setConnected(source.readyState === EventSource.OPEN);
    source.onmessage = (e: MessageEvent<string>) => {
      const event = parseEvent(e.data);
      if (!event) return;
      if (event.kind === "status") {
        if (event.turnId != null && event.turnId !== turnRef.current) {
          // A new turn: the previous turn's columns are history now.
          if (turnRef.current != null && (event.status === "pending" || event.status === "streaming")) {
            clearExecutions();
          }
          turnRef.current = event.turnId;
          setTurnId(event.turnId);
        }
        setStatus(event.status);
        setStatusTick((t) => t + 1);
        return;
      }
      let folder = folders.current.get(event.executionId);
      if (folder && compareAttempts(event.attemptId, folder.view.attemptId) < 0) return; // stale
      if (!folder || compareAttempts(event.attemptId, folder.view.attemptId) > 0) {
        folder?.close();
        folder = new ExecutionFolder(event.executionId, event.attemptId, event.modelId, publish);
        folders.current.set(event.executionId, folder);
        if (!order.current.includes(event.executionId)) order.current.push(event.executionId);
        publish();
      }
      folder.push(event.chunk);
    };
    return () => {
      source.close();
      setConnected(false);
      for (const f of folders.current.values()) f.close();
      folders.current.clear();
      order.current = [];
    };
  }, [conversationId, publish, clearExecutions]);

  return { status, statusTick, turnId, executions, connected, clearExecutions };
}
