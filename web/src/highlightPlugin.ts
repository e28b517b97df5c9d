// Loaded on demand (a dynamic import from richMarkdown.ts): highlight.js through
// rehype-highlight. Nothing else may import this module statically, or highlight.js would be
// back in the initial bundle.
import rehypeHighlight from "rehype-highlight";

export { rehypeHighlight };
