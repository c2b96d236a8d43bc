import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { csvField, isoTime, type UsageRow, usageCsv } from "./csv.ts";

const row = (over: Partial<UsageRow> = {}): UsageRow => ({
  id: "chatcmpl-abc",
  apiKeyId: "key_1",
  model: "service-extract",
  promptTokens: 12n,
  completionTokens: 6n,
  costUsdMicros: 24n,
  createTime: timestampFromMs(Date.UTC(2026, 10, 3, 14, 5, 9, 250)),
  ...over,
});

describe("usageCsv", () => {
  it("writes the header and one CRLF line per record", () => {
    const csv = usageCsv([row(), row({ id: "chatcmpl-def", costUsdMicros: 1_234_567n })]);
    expect(csv).toBe(
      "id,create_time,model,api_key_id,prompt_tokens,completion_tokens,cost_usd_micros,cost_usd\r\n" +
        "chatcmpl-abc,2026-11-03T14:05:09.250Z,service-extract,key_1,12,6,24,0.000024\r\n" +
        "chatcmpl-def,2026-11-03T14:05:09.250Z,service-extract,key_1,12,6,1234567,1.234567\r\n",
    );
  });

  it("writes only the header for no records", () => {
    expect(usageCsv([])).toBe(
      "id,create_time,model,api_key_id,prompt_tokens,completion_tokens,cost_usd_micros,cost_usd\r\n",
    );
  });

  it("quotes fields that need it, and leaves a missing time empty", () => {
    const csv = usageCsv([row({ model: 'gpt, "mini"\nv2', createTime: undefined })]);
    expect(csv.split("\r\n")[1]).toBe('chatcmpl-abc,,"gpt, ""mini""\nv2",key_1,12,6,24,0.000024');
  });
});

describe("csvField and isoTime", () => {
  it("quotes only commas, quotes and line breaks", () => {
    expect(csvField("plain")).toBe("plain");
    expect(csvField("a,b")).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField("line\r\nbreak")).toBe('"line\r\nbreak"');
  });

  it("prints times in ISO 8601 UTC", () => {
    expect(isoTime(timestampFromMs(0))).toBe("1970-01-01T00:00:00.000Z");
    expect(isoTime(undefined)).toBe("");
  });
});
