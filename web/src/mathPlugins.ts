// Loaded on demand (a dynamic import from richMarkdown.ts): KaTeX, its CSS and fonts, and the
// remark/rehype plugins that use it. Nothing else may import this module statically, or KaTeX
// would be back in the initial bundle.
import "katex/dist/katex.min.css";
import rehypeKatex from "rehype-katex";
import remarkMath from "remark-math";

export { rehypeKatex, remarkMath };
