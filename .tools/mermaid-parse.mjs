// The real Mermaid parser (the pinned `mermaid` package), offline in node.
//
// stdin: a JSON array of diagram sources (the text inside a ```mermaid fence).
// stdout: a JSON array, one entry per source: {"ok": true, "type": "<diagramType>"}
// or {"ok": false, "error": "<Mermaid's message>"}.
//
// mermaid.parse() needs no layout and no browser, but mermaid imports DOMPurify,
// which without a DOM exports an object lacking its hooks; parsing never sanitizes
// markup, so inert hooks are enough. Exit 2 on bad input.
import { readFileSync } from "node:fs";

globalThis.window = globalThis;
const DOMPurify = (await import("dompurify")).default;
for (const name of ["addHook", "removeHook", "removeHooks", "removeAllHooks"]) {
  if (typeof DOMPurify[name] !== "function") DOMPurify[name] = () => {};
}
if (typeof DOMPurify.sanitize !== "function") DOMPurify.sanitize = (s) => String(s);
const mermaid = (await import("mermaid")).default;
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });

let sources;
try {
  sources = JSON.parse(readFileSync(0, "utf8"));
  if (!Array.isArray(sources) || !sources.every((s) => typeof s === "string")) {
    throw new Error("expected a JSON array of strings");
  }
} catch (err) {
  process.stderr.write(`mermaid-parse: bad input: ${err.message}\n`);
  process.exit(2);
}

const results = [];
for (const source of sources) {
  try {
    const parsed = await mermaid.parse(source);
    results.push({ ok: true, type: parsed.diagramType });
  } catch (err) {
    results.push({ ok: false, error: String((err && err.message) || err) });
  }
}
process.stdout.write(JSON.stringify(results) + "\n");
