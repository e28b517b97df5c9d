// Search over conversation titles and message text (GET /api/search): results as you type
// (debounced), each a link that opens the conversation scrolled to the matching message.
import { useEffect, useId, useState } from "react";
import { api, errorMessage, type SearchHit } from "../api";
import { messageHash } from "../route";

const DEBOUNCE_MS = 250;
const MAX_CHARS = 200;

export function SearchBox() {
  const [query, setQuery] = useState("");
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const inputId = useId();

  useEffect(() => {
    const q = query.trim();
    if (!/[\p{L}\p{N}_]/u.test(q)) {
      setHits(null);
      setError(null);
      return;
    }
    let cancelled = false;
    const timer = setTimeout(() => {
      api
        .search(q)
        .then((r) => {
          if (cancelled) return;
          setHits(r.items);
          setError(null);
        })
        .catch((e) => {
          if (cancelled) return;
          setHits(null);
          setError(errorMessage(e));
        });
    }, DEBOUNCE_MS);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [query]);

  return (
    <div className="search" role="search">
      <label htmlFor={inputId} className="visually-hidden">
        Search conversations
      </label>
      <input
        id={inputId}
        type="search"
        data-testid="search-input"
        placeholder="Search conversations…"
        maxLength={MAX_CHARS}
        value={query}
        onChange={(e) => setQuery(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Escape") setQuery("");
        }}
      />
      {error && (
        <div className="notice error small" role="alert">
          {error}
        </div>
      )}
      {hits && (
        <ul className="search-results" data-testid="search-results" aria-label="Search results">
          {hits.length === 0 && <li className="muted small pad">No matches.</li>}
          {hits.map((hit) => (
            <li key={`${hit.conversationId}/${hit.messageId ?? ""}`}>
              <a
                href={messageHash(hit.conversationId, hit.messageId)}
                data-testid="search-hit"
                data-message-id={hit.messageId ?? undefined}
                onClick={() => setQuery("")}
              >
                <span className="search-title">{hit.title || "Untitled"}</span>
                <span className="search-where muted small">
                  {hit.messageId ? (hit.role === "user" ? "you" : "answer") : "title"} ·{" "}
                  {new Date(hit.at).toLocaleDateString()}
                </span>
                {hit.messageId && (
                  <span className="search-snippet small">
                    {hit.snippet.map((s, i) => (s.match ? <mark key={i}>{s.text}</mark> : <span key={i}>{s.text}</span>))}
                  </span>
                )}
              </a>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
