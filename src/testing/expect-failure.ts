import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";

/**
 * Runs a call that must fail and asserts what AIP-193 promises callers: the Connect code and
 * exactly one `sluice` ErrorInfo with the catalogue reason. Returns the error for further checks.
 */
export async function expectFailure(run: () => Promise<unknown>, code: Code, reason: string): Promise<ConnectError> {
  let caught: unknown;
  try {
    await run();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConnectError);
  const err = ConnectError.from(caught);
  expect(Code[err.code]).toBe(Code[code]);
  expect(err.findDetails(ErrorInfoSchema).map((i) => `${i.domain}/${i.reason}`)).toEqual([`sluice/${reason}`]);
  return err;
}
