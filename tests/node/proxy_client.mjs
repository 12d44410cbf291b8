// The official openai npm package as a client of `vecmem proxy` (tests/integration/test_proxy_process.py runs it):
//   node proxy_client.mjs BASE_URL USER
// A conversation whose first request is answered whole and whose second is streamed, with the user named by the
// request's `user` field first and by the X-Vecmem-User header then; then a request the model server refuses
// with a 429. Prints one JSON object: the answers, the ids of the memories the proxy put into each request, and
// the error the SDK raised.
import OpenAI from "openai";

const [baseURL, user] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const model = "scripted-model";
const history = [{ role: "user", content: "I am allergic to peanuts." }];

const { data: first, response: firstResponse } = await client.chat.completions
  .create({ model, messages: history, user })
  .withResponse();
history.push(
  { role: "assistant", content: first.choices[0].message.content },
  { role: "user", content: "Is a peanut butter sandwich a good snack for my hike?" },
);
const { data: stream, response: streamResponse } = await client.chat.completions
  .create({ model, messages: history, stream: true }, { headers: { "X-Vecmem-User": user } })
  .withResponse();
let streamed = "";
let chunks = 0;
for await (const chunk of stream) {
  streamed += chunk.choices[0]?.delta?.content ?? "";
  chunks += 1;
}

let error = null;
try {
  await client.chat.completions.create({ model, messages: [{ role: "user", content: "Please rate limit me" }], user });
} catch (raised) {
  error = {
    rateLimitError: raised instanceof OpenAI.RateLimitError,
    status: raised.status,
    type: raised.type,
    retryAfter: raised.headers?.get("retry-after") ?? null,
    message: raised.message,
  };
}

console.log(JSON.stringify({
  first: first.choices[0].message.content,
  firstMemories: firstResponse.headers.get("x-vecmem-memories"),
  streamed,
  chunks,
  streamedMemories: streamResponse.headers.get("x-vecmem-memories"),
  error,
}));
