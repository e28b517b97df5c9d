// Which optional Markdown plugins a text needs, and loading them once, on demand.
//
// KaTeX (math) and highlight.js (code) are most of the UI's weight, and most messages need
// neither, so they are separate chunks fetched by dynamic import the first time a rendered
// text needs them: math when it holds a `$` (remark-math's delimiter), highlighting when it
// holds a fenced code block. Until a chunk arrives the text renders without that plugin; a
// chunk that fails to load leaves it so (plain Markdown is still correct, only less pretty).
import { useEffect, useMemo, useState } from "react";
import type { Options } from "react-markdown";

type PluggableList = NonNullable<Options["remarkPlugins"]>;

/** remark-math parses `$…$` and `$$…$$`: any `$` may start math. */
export function needsMath(text: string): boolean {
  return text.includes("$");
}

/** rehype-highlight (with `detect: false`) only touches fenced blocks that name a language. */
export function needsHighlight(text: string): boolean {
  return /(^|\n)[ \t]{0,3}(```|~~~)[ \t]*[^\s`~]/.test(text);
}

interface Loaded {
  math?: { remark: PluggableList; rehype: PluggableList };
  highlight?: PluggableList;
}

const loaded: Loaded = {};
let mathLoad: Promise<void> | undefined;
let highlightLoad: Promise<void> | undefined;

function loadMath(): Promise<void> {
  mathLoad ??= import("./mathPlugins").then(
    (m) => {
      loaded.math = { remark: [m.remarkMath], rehype: [m.rehypeKatex] };
    },
    (e: unknown) => console.warn("could not load KaTeX; math stays as text", e),
  );
  return mathLoad;
}

function loadHighlight(): Promise<void> {
  highlightLoad ??= import("./highlightPlugin").then(
    (m) => {
      loaded.highlight = [[m.rehypeHighlight, { detect: false }]];
    },
    (e: unknown) => console.warn("could not load highlight.js; code stays plain", e),
  );
  return highlightLoad;
}

const EMPTY: PluggableList = [];

/**
 * The plugins for `text`, given the always-on ones: the optional ones once loaded. A load is
 * started the first time a text needs it; every component waiting for it re-renders when done.
 */
export function useMarkdownPlugins(
  text: string,
  baseRemark: PluggableList,
): { remark: PluggableList; rehype: PluggableList } {
  const math = needsMath(text);
  const highlight = needsHighlight(text);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const waits: Promise<void>[] = [];
    if (math && !loaded.math) waits.push(loadMath());
    if (highlight && !loaded.highlight) waits.push(loadHighlight());
    if (waits.length === 0) return;
    let alive = true;
    void Promise.all(waits).then(() => alive && setVersion((v) => v + 1));
    return () => {
      alive = false;
    };
  }, [math, highlight]);
  const withMath = math && loaded.math !== undefined;
  const withHighlight = highlight && loaded.highlight !== undefined;
  // Stable arrays per combination, so memoised Markdown does not re-parse for nothing.
  return useMemo(
    () => ({
      remark: withMath ? [...baseRemark, ...loaded.math!.remark] : baseRemark,
      rehype: [
        ...(withMath ? loaded.math!.rehype : EMPTY),
        ...(withHighlight ? loaded.highlight! : EMPTY),
      ],
    }),
    // version: a load finished (withMath / withHighlight flip with it)
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [withMath, withHighlight, baseRemark, version],
  );
}
