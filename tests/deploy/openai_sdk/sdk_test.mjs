// kvactor serve as OpenAI's official Node SDK sees it (run by tests/deploy/openai_sdk.sh against a
// server on the qwen2 fixture, served as "tiny" with the API key "sesame"):
//   node sdk_test.mjs BASE_URL
// Every check that fails is printed; the exit status is the number of failures (0: all passed).
import OpenAI from "openai";

const base = process.argv[2];
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sesame", maxRetries: 0 });
let failures = 0;

function check(ok, what) {
  if (!ok) {
    failures += 1;
    console.log(`openai_sdk: FAIL: ${what}`);
  }
}

async function section(name, body) {
  try {
    await body();
  } catch (e) {
    failures += 1;
    console.log(`openai_sdk: FAIL: ${name}: ${e.constructor.name}: ${e.message}`);
  }
}

// The error the call threw, or null when it did not throw.
async function thrown(call) {
  try {
    await call();
    return null;
  } catch (e) {
    return e;
  }
}

// One Prometheus sample of /metrics ("name" or 'name{label="x"}'), or NaN when absent.
async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.slice(name.length + 1));
}

// Waits (polling /metrics every 50 ms, for up to 30 s) until every named metric equals its value.
async function metricsSettle(want) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const got = {};
    for (const name of Object.keys(want)) got[name] = await metric(name);
    if (Object.keys(want).every((n) => got[n] === want[n])) return got;
    if (Date.now() > deadline) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const greedy = { model: "tiny", temperature: 0, max_tokens: 8, ignore_eos: true };

await section("models", async () => {
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === "tiny", "models.list names tiny");
});

let wholeText = "";
await section("completion", async () => {
  const r = await client.completions.create({ ...greedy, prompt: "Hello world" });
  wholeText = r.choices[0].text;
  check(r.object === "text_completion", `object is ${r.object}`);
  check(wholeText.length > 0, "the completion has text");
  check(r.choices[0].finish_reason === "length", `finish_reason ${r.choices[0].finish_reason}`);
  check(r.usage.completion_tokens === 8, `usage.completion_tokens ${r.usage.completion_tokens}`);
  check(r.usage.total_tokens === r.usage.prompt_tokens + 8, "usage.total_tokens adds up");
});

await section("completion stream", async () => {
  const stream = await client.completions.create({
    ...greedy,
    prompt: "Hello world",
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(text === wholeText, `the stream's text '${text}' is not the completion's '${wholeText}'`);
  check(finish === "length", `stream finish_reason ${finish}`);
  check(usage !== null && usage.completion_tokens === 8, "the stream's usage chunk");
});

await section("chat", async () => {
  const messages = [{ role: "user", content: "Hi" }];
  const r = await client.chat.completions.create({ ...greedy, messages });
  const content = r.choices[0].message.content;
  check(r.choices[0].message.role === "assistant", "the answer is the assistant's");
  const stream = await client.chat.completions.create({ ...greedy, messages, stream: true });
  let streamed = "";
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
  check(streamed === content, `the chat stream '${streamed}' is not the answer '${content}'`);
});

await section("logprobs and n", async () => {
  const r = await client.completions.create({
    model: "tiny",
    prompt: "Hello",
    max_tokens: 4,
    ignore_eos: true,
    logprobs: 2,
    n: 3,
    seed: 7,
  });
  check(r.choices.length === 3, `${r.choices.length} choices for n = 3`);
  const lp = r.choices[0].logprobs;
  check(lp.tokens.length === 4 && lp.token_logprobs.length === 4, "a logprob per token");
  check(lp.top_logprobs.every((t) => Object.keys(t).length >= 1), "top_logprobs per token");
  check(lp.token_logprobs.every((x) => x <= 0), "logprobs are <= 0");
  const chat = await client.chat.completions.create({
    ...greedy,
    messages: [{ role: "user", content: "Hi" }],
    logprobs: true,
    top_logprobs: 2,
  });
  const content = chat.choices[0].logprobs.content;
  check(content.length === 8 && content[0].top_logprobs.length === 2, "chat logprobs");
});

await section("errors", async () => {
  const bad = await thrown(() =>
    client.completions.create({ model: "tiny", prompt: "x", temperature: "hot" }),
  );
  check(bad instanceof OpenAI.BadRequestError, `a wrong type throws ${bad?.constructor.name}`);
  check(bad?.status === 400 && bad?.param === "temperature", "the 400 names temperature");
  const other = await thrown(() => client.completions.create({ model: "other", prompt: "x" }));
  check(other instanceof OpenAI.NotFoundError, `another model throws ${other?.constructor.name}`);
  const stranger = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
  const denied = await thrown(() => stranger.models.list());
  check(denied instanceof OpenAI.AuthenticationError, `a wrong key throws ${denied?.constructor.name}`);
  const long = await thrown(() =>
    client.completions.create({ model: "tiny", prompt: "x", max_tokens: 100000 }),
  );
  check(long?.status === 400 && long?.param === "max_tokens", "max_tokens beyond the model");
});

// A client that goes away mid-stream: its engine requests are aborted and their KV blocks freed.
await section("abort mid-stream", async () => {
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model: "tiny", prompt: "Hello", max_tokens: 250, n: 32, ignore_eos: true, stream: true },
    { signal: controller.signal },
  );
  let chunks = 0;
  await thrown(async () => {
    for await (const _ of stream) {
      chunks += 1;
      if (chunks === 5) controller.abort(); // the SDK ends the iteration, or throws AbortError
    }
  });
  check(chunks < 32 * 250, `the stream went on to its end (${chunks} chunks) after the abort`);
  const got = await metricsSettle({
    "kvactor:api_streams_open": 0,
    "kvactor:api_requests_in_flight": 0,
    "kvactor:num_requests_running": 0,
    "kvactor:kv_cache_usage_perc": 0,
  });
  for (const [name, value] of Object.entries(got))
    check(value === 0, `after the abort ${name} is ${value}, not 0`);
  const after = await client.completions.create({ ...greedy, prompt: "Hello world" });
  check(after.choices[0].text === wholeText, "the server answers as before after the abort");
});

if (failures === 0) console.log("openai_sdk: ok");
process.exit(failures);
