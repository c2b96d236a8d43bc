/** Reads a server stream to its end into an array, so a test can assert on every message it carried. */
export async function drain<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item);
  return out;
}
