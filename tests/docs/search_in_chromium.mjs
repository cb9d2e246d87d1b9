// Searches a served copy of the site in headless Chromium, as a reader does.
//
// Usage: node --experimental-websocket search_in_chromium.mjs CHROMIUM BASE_URL SCREENSHOT_DIR QUERY...
// Opens BASE_URL?q=QUERY for each query (the theme runs that search on load), waits until the
// search worker has answered, prints one JSON line per query with the result count the page
// shows and the titles of the first results, and saves a screenshot when SCREENSHOT_DIR is
// not "-". Talks to Chromium over the DevTools protocol; needs no package beyond Node 20.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [chromium, base, screenshots, ...queries] = process.argv.slice(2);
const port = 9300 + Math.floor(Math.random() * 600);
const browser = spawn(chromium, [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
  `--user-data-dir=${mkdtempSync(join(tmpdir(), "chromium-"))}`,
  `--remote-debugging-port=${port}`, "--window-size=1280,900", "about:blank",
], { stdio: "ignore" });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function target() {
  for (let i = 0; i < 100; i++) {
    try {
      const pages = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      const page = pages.find((p) => p.type === "page");
      if (page) return page.webSocketDebuggerUrl;
    } catch {}
    await sleep(100);
  }
  throw new Error("Chromium did not start");
}

const socket = new WebSocket(await target());
await new Promise((resolve) => socket.addEventListener("open", resolve));
let next = 0;
const pending = new Map();
socket.addEventListener("message", (event) => {
  const message = JSON.parse(event.data);
  if (pending.has(message.id)) {
    pending.get(message.id)(message);
    pending.delete(message.id);
  }
});
const send = (method, params = {}) =>
  new Promise((resolve) => {
    const id = ++next;
    pending.set(id, resolve);
    socket.send(JSON.stringify({ id, method, params }));
  });
const evaluate = async (expression) =>
  (await send("Runtime.evaluate", { expression, returnByValue: true })).result?.result?.value;

try {
  for (const query of queries) {
    await send("Page.navigate", { url: `${base}?q=${encodeURIComponent(query)}` });
    let state = null;
    for (let i = 0; i < 150; i++) {
      await sleep(100);
      state = await evaluate(`(() => {
        const meta = document.querySelector(".md-search-result__meta");
        const titles = [...document.querySelectorAll(".md-search-result__item h1")]
          .map((h) => h.textContent.trim());
        return { meta: meta ? meta.textContent.trim() : null, titles };
      })()`);
      if (state && state.meta && !/^Initializing/.test(state.meta) && state.titles.length) break;
    }
    if (screenshots !== "-") {
      const shot = await send("Page.captureScreenshot", { format: "png" });
      writeFileSync(join(screenshots, `search_${query}.png`), Buffer.from(shot.result.data, "base64"));
    }
    console.log(JSON.stringify({ query, ...state, titles: state.titles.slice(0, 8) }));
  }
} finally {
  socket.close();
  browser.kill();
}
