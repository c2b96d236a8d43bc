/**
 * Saves text built in the page as a file, through a Blob URL and a temporary `<a download>`: no server round
 * trip, and nothing about the file (or the credential) ever goes into a URL the server sees.
 */

/** Offers `text` to the user as a file named `filename`. */
export function downloadText(filename: string, text: string, type = "text/csv;charset=utf-8"): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  // Revoked on the next task, once the browser has started the download.
  setTimeout(() => URL.revokeObjectURL(url), 0);
}
