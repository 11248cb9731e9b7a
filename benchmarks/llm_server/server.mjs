// A local OpenAI-compatible chat endpoint for Memory Hub's LLM features (hints, dream, usefulness),
// served by node-llama-cpp over a GGUF model. Loopback only.
//   node server.mjs MODEL.gguf [PORT]
// POST /v1/chat/completions {messages, max_tokens, temperature, response_format}
import http from "node:http";
import {getLlama, LlamaChatSession} from "node-llama-cpp";

const [modelPath, portArg] = process.argv.slice(2);
if (!modelPath) { console.error("usage: node server.mjs MODEL.gguf [PORT]"); process.exit(2); }
const port = Number(portArg || 8080);
const threads = Number(process.env.LLM_THREADS || 2);

const llama = await getLlama({gpu: false, build: "never"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 2048, threads});
const jsonGrammar = await llama.getGrammarFor("json");
let queue = Promise.resolve();  // one sequence: requests run one after another

async function complete(body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const system = messages.filter(m => m.role === "system").map(m => String(m.content)).join("\n");
  const user = messages.filter(m => m.role !== "system").map(m => String(m.content)).join("\n");
  const sequence = context.getSequence();
  try {
    const session = new LlamaChatSession({contextSequence: sequence, systemPrompt: system || undefined});
    const json = body.response_format && body.response_format.type === "json_object";
    const text = await session.prompt(user, {
      maxTokens: Math.min(Number(body.max_tokens || 256), 1024),
      temperature: Number(body.temperature || 0),
      grammar: json ? jsonGrammar : undefined,
    });
    return text;
  } finally {
    sequence.dispose();
  }
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && (req.url === "/health" || req.url === "/v1/models")) {
    res.writeHead(200, {"content-type": "application/json"});
    res.end(JSON.stringify({object: "list", data: [{id: "local", object: "model"}]}));
    return;
  }
  if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
    res.writeHead(404); res.end(); return;
  }
  let raw = "";
  req.on("data", c => { raw += c; if (raw.length > 1e6) req.destroy(); });
  req.on("end", () => {
    let body;
    try { body = JSON.parse(raw); } catch { res.writeHead(400); res.end("bad json"); return; }
    const started = Date.now();
    queue = queue.then(() => complete(body)).then(text => {
      res.writeHead(200, {"content-type": "application/json"});
      res.end(JSON.stringify({
        object: "chat.completion", model: "local", created: Math.floor(started / 1000),
        choices: [{index: 0, finish_reason: "stop", message: {role: "assistant", content: text}}],
      }));
    }, err => {
      res.writeHead(500, {"content-type": "application/json"});
      res.end(JSON.stringify({error: {message: String(err)}}));
    });
  });
});
server.listen(port, "127.0.0.1", () => console.log(`llm server on http://127.0.0.1:${port}/v1`));
