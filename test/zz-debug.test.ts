import { it } from "vitest";
import { startTestApp } from "./support/harness.ts";
import { postChat, CHAT_MESSAGES } from "./support/http.ts";
it("dbg", async () => {
  const app = await startTestApp();
  const poor = await app.newAccount({ capUsdMicros: 1n, rps: 1000, burst: 1000 });
  const r = await postChat(app, poor.apiKey, { messages: CHAT_MESSAGES, stream: true });
  console.log(r.status, [...r.headers.entries()], r.text);
  const r2 = await postChat(app, poor.apiKey, { messages: CHAT_MESSAGES });
  console.log(r2.status, [...r2.headers.entries()], r2.text);
  await app.close();
});
