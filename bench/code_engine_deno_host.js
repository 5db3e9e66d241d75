// The Deno side of bench/code_engine_deno.py: one process, started with no permissions at all,
// runs each program in a fresh module Worker with permissions "none", and relays the program's
// tool calls to its parent as JSON lines on stdout; the answers come back as JSON lines on stdin.
//
// parent -> host: {"op":"run","run":N,"code":"...","timeout_ms":T}
//                 {"op":"result","run":N,"call":K,"ok":true,"value":V} | {..."ok":false,"error":"..."}
//                 {"op":"cancel","run":N}
// host -> parent: {"op":"ready"}
//                 {"op":"call","run":N,"call":K,"server":"demo","tool":"echo","args":{...}}
//                 {"op":"done","run":N,"ok":true,"value":V,"output":"..."} | {..."ok":false,"error":"...","output":"..."}
//
// The program is the body of an async function with `tools` in scope:
//   const r = await tools.demo.echo({text: "hi"}); return r;

const PRELUDE = `
const pending = new Map();
let nextCall = 0;
const output = [];
let outputSize = 0;
const OUTPUT_CAP = 65536;
const write = (...parts) => {
  const line = parts.map((p) => (typeof p === "string" ? p : Deno.inspect(p))).join(" ") + "\\n";
  if (outputSize < OUTPUT_CAP) output.push(line.slice(0, OUTPUT_CAP - outputSize));
  outputSize += line.length;
};
console.log = write; console.info = write; console.warn = write; console.error = write;
const call = (server, tool, args) => new Promise((resolve, reject) => {
  const id = ++nextCall;
  pending.set(id, { resolve, reject });
  postMessage({ t: "call", id, server, tool, args: args ?? {} });
});
const tools = new Proxy({}, {
  get: (_, server) => new Proxy({}, { get: (_, tool) => (args) => call(String(server), String(tool), args) }),
});
const AsyncFunction = (async () => {}).constructor;
self.onmessage = async (event) => {
  const m = event.data;
  if (m.t === "result") {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.ok) p.resolve(m.value); else p.reject(new Error(m.error));
    return;
  }
  try {
    const value = await new AsyncFunction("tools", m.code)(tools);
    postMessage({ t: "done", ok: true, value: value === undefined ? null : value, output: output.join("") });
  } catch (e) {
    postMessage({ t: "done", ok: false, error: String(e && e.stack ? e.stack : e), output: output.join("") });
  }
};
`;
const WORKER_URL = URL.createObjectURL(new Blob([PRELUDE], { type: "application/javascript" }));

const encoder = new TextEncoder();
const stdout = Deno.stdout.writable.getWriter();
let writing = Promise.resolve();
function send(message) {
  const bytes = encoder.encode(JSON.stringify(message) + "\n");
  writing = writing.then(() => stdout.write(bytes));
}

const runs = new Map();

function finish(run, message) {
  const state = runs.get(run);
  if (!state) return;
  runs.delete(run);
  clearTimeout(state.timer);
  state.worker.terminate();
  send({ op: "done", run, ...message });
}

function start(m) {
  const worker = new Worker(WORKER_URL, { type: "module", deno: { permissions: "none" } });
  const state = { worker, timer: undefined };
  runs.set(m.run, state);
  state.timer = setTimeout(() => finish(m.run, { ok: false, error: `timeout after ${m.timeout_ms} ms` }), m.timeout_ms);
  worker.onmessage = (event) => {
    const w = event.data;
    if (w.t === "call") {
      send({ op: "call", run: m.run, call: w.id, server: w.server, tool: w.tool, args: w.args });
    } else if (w.t === "done") {
      finish(m.run, w.ok ? { ok: true, value: w.value, output: w.output } : { ok: false, error: w.error, output: w.output });
    }
  };
  worker.onerror = (event) => {
    event.preventDefault();
    finish(m.run, { ok: false, error: `worker error: ${event.message}` });
  };
  worker.postMessage({ t: "run", code: m.code });
}

function handle(m) {
  if (m.op === "run") start(m);
  else if (m.op === "result") {
    const state = runs.get(m.run);
    if (state) state.worker.postMessage({ t: "result", id: m.call, ok: m.ok, value: m.value, error: m.error });
  } else if (m.op === "cancel") finish(m.run, { ok: false, error: "cancelled" });
}

send({ op: "ready", deno: Deno.version.deno, v8: Deno.version.v8 });
const decoder = new TextDecoder();
let buffer = "";
for await (const chunk of Deno.stdin.readable) {
  buffer += decoder.decode(chunk, { stream: true });
  let newline;
  while ((newline = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, newline);
    buffer = buffer.slice(newline + 1);
    if (line) handle(JSON.parse(line));
  }
}
Deno.exit(0);
