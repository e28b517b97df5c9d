import { describe, expect, it } from "vitest";
import { needsHighlight, needsMath } from "./richMarkdown";

describe("which lazy Markdown plugins a text needs", () => {
  it("math: any dollar sign", () => {
    expect(needsMath("E = $mc^2$")).toBe(true);
    expect(needsMath("$$\nx\n$$")).toBe(true);
    expect(needsMath("no math here")).toBe(false);
  });
  it("highlighting: a fenced block that names a language", () => {
    expect(needsHighlight("```python\nx = 1\n```")).toBe(true);
    expect(needsHighlight("text\n  ~~~ts\nlet a\n~~~")).toBe(true);
    expect(needsHighlight("```\nplain block\n```")).toBe(false);
    expect(needsHighlight("inline `code` only")).toBe(false);
    expect(needsHighlight("x ```js in a line")).toBe(false);
  });
});
