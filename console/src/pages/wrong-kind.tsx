/**
 * Shown when a page needs the other kind of credential (a holder page while signed in with the admin token,
 * or the reverse), rather than calling RPCs that would only refuse.
 */
import { Page } from "../components/page.tsx";
import { href } from "../router.ts";
import { type CredentialKind, kindLabel } from "../session.ts";

/** The wrong-credential page: which kind the page needs, and the way to the pages this session has. */
export function WrongKindPage({ needs, has }: { needs: CredentialKind; has: CredentialKind }) {
  return (
    <Page title={needs === "api_key" ? "API key needed" : "Admin token needed"}>
      <p>
        This page needs an {kindLabel(needs)}, and you are signed in with the {kindLabel(has)}. Sign out and sign in
        again to use it.
      </p>
      <p>
        <a href={href(has === "api_key" ? "/billing" : "/admin")}>Go to your pages</a>
      </p>
    </Page>
  );
}
