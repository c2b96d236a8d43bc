/** The page for any `/console/...` path the console does not know, with a way back home. */
import { Page } from "../components/page.tsx";
import { href } from "../router.ts";

/** The not-found page. */
export function NotFoundPage() {
  return (
    <Page title="Page not found">
      <p>There is no console page at this address.</p>
      <p>
        <a href={href("/")}>Go to the console home</a>
      </p>
    </Page>
  );
}
