// Markdown for text parts: GFM, LaTeX (`$...$`, `$$...$$`) with KaTeX, code blocks highlighted
// by highlight.js (rehype-highlight) with a Copy button. Links open in a new tab; raw HTML is
// not rendered (react-markdown's default), so model output cannot inject markup.
import "katex/dist/katex.min.css";
import { memo } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import rehypeHighlight from "rehype-highlight";
import rehypeKatex from "rehype-katex";
import remarkGfm from "remark-gfm";
import remarkMath from "remark-math";
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

const remarkPlugins = [remarkGfm, remarkMath];
const rehypePlugins = [rehypeKatex, [rehypeHighlight, { detect: false }] as const];

export const Markdown = memo(function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <ReactMarkdown
        remarkPlugins={remarkPlugins}
        rehypePlugins={rehypePlugins as never}
        components={components}
      >
        {text}
      </ReactMarkdown>
    </div>
  );
});
