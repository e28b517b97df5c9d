// Markdown for text parts: GFM, LaTeX (`$...$`, `$$...$$`) with KaTeX, code blocks highlighted
// by highlight.js (rehype-highlight) with a Copy button. KaTeX and highlight.js are loaded on
// demand, the first time a text needs them (richMarkdown.ts). Links open in a new tab; raw
// HTML is not rendered (react-markdown's default), so model output cannot inject markup.
import { memo } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";
import { useMarkdownPlugins } from "../richMarkdown";
import { CopyButton } from "./CopyButton";

const components: Components = {
  a: ({ node: _node, ...props }) => <a {...props} target="_blank" rel="noreferrer noopener" />,
  pre: ({ node, children, ...props }) => {
    const text = node ? nodeText(node) : "";
    return (
      <div className="code-block">
        <CopyButton text={text} label="Copy code" testId="copy-code" />
        <pre {...props}>{children}</pre>
      </div>
    );
  },
};

interface HastLike {
  type: string;
  value?: string;
  children?: HastLike[];
}

/** The text of a hast node (the source of a code block, before highlighting splits it). */
function nodeText(node: HastLike): string {
  if (node.type === "text") return node.value ?? "";
  return (node.children ?? []).map(nodeText).join("");
}

const remarkPlugins = [remarkGfm];

export const Markdown = memo(function Markdown({ text }: { text: string }) {
  const plugins = useMarkdownPlugins(text, remarkPlugins);
  return (
    <div className="markdown">
      <ReactMarkdown remarkPlugins={plugins.remark} rehypePlugins={plugins.rehype} components={components}>
        {text}
      </ReactMarkdown>
    </div>
  );
});
