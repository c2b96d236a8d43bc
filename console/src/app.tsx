/**
 * The console's shell: header with the navigation for the signed-in kind, the sign-out button, and the page
 * the path names. Pages for the other kind, or for nobody signed in, are never called with the wrong
 * credential: the shell shows the sign-in form or says which credential is needed.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { Loading } from "./components/feedback.tsx";
import { AdminAccountPage } from "./pages/admin-account.tsx";
import { AdminSearchPage } from "./pages/admin-search.tsx";
import { BillingPage } from "./pages/billing.tsx";
import { KeysPage } from "./pages/keys.tsx";
import { NotFoundPage } from "./pages/not-found.tsx";
import { SignInPage } from "./pages/sign-in.tsx";
import { StatusPage } from "./pages/status.tsx";
import { UsagePage } from "./pages/usage.tsx";
import { WrongKindPage } from "./pages/wrong-kind.tsx";
import { href, navigate, parseRoute, type Route, usePath } from "./router.ts";
import { type CredentialKind, getSession, onSessionChange, type Session, signOut } from "./session.ts";

/** The session, re-rendering the caller on sign-in and sign-out. */
function useSession(): Session | undefined {
  const [session, setSession] = useState(getSession);
  useEffect(() => onSessionChange(() => setSession(getSession())), []);
  return session;
}

/** Where each kind lands after sign-in. */
function homeOf(kind: CredentialKind): string {
  return kind === "api_key" ? "/billing" : "/admin";
}

/** The links of the header for the session's kind. */
function navLinks(session: Session | undefined): [string, string][] {
  if (!session)
    return [
      ["/", "Sign in"],
      ["/status", "Status"],
    ];
  if (session.kind === "api_key") {
    return [
      ["/billing", "Billing"],
      ["/usage", "Usage"],
      ["/keys", "Keys"],
      ["/status", "Status"],
    ];
  }
  return [
    ["/admin", "Accounts"],
    ["/status", "Status"],
  ];
}

/** Whether the link to `to` is the current page (an account page counts as Accounts). */
function isCurrent(to: string, path: string): boolean {
  return to === path || (to === "/admin" && path.startsWith("/admin/"));
}

/** A page that needs `kind`: the sign-in form when signed out, a notice when signed in as the other kind. */
function Guard(props: { session: Session | undefined; kind: CredentialKind; children: ComponentChildren }) {
  if (!props.session) return <SignInPage />;
  if (props.session.kind !== props.kind) return <WrongKindPage needs={props.kind} has={props.session.kind} />;
  return <>{props.children}</>;
}

/** The page for a route. */
function View({ route, session }: { route: Route; session: Session | undefined }) {
  switch (route.name) {
    case "home":
      return session ? <Loading what="your pages" /> : <SignInPage />;
    case "billing":
      return (
        <Guard session={session} kind="api_key">
          <BillingPage />
        </Guard>
      );
    case "usage":
      return (
        <Guard session={session} kind="api_key">
          <UsagePage />
        </Guard>
      );
    case "keys":
      return (
        <Guard session={session} kind="api_key">
          <KeysPage />
        </Guard>
      );
    case "status":
      return <StatusPage />;
    case "admin":
      return (
        <Guard session={session} kind="admin_token">
          <AdminSearchPage />
        </Guard>
      );
    case "account":
      return (
        <Guard session={session} kind="admin_token">
          <AdminAccountPage key={route.id} id={route.id} />
        </Guard>
      );
    case "not-found":
      return <NotFoundPage />;
  }
}

/** The whole console. */
export function App() {
  const path = usePath();
  const session = useSession();
  const route = parseRoute(path);
  useEffect(() => {
    if (route.name === "home" && session) navigate(homeOf(session.kind), true);
  }, [route.name, session]);

  return (
    <>
      <a class="skip-link" href="#main">
        Skip to the page
      </a>
      <header class="site-header">
        <a class="brand" href={href("/")}>
          Sluice console
        </a>
        <nav aria-label="Console">
          <ul>
            {navLinks(session).map(([to, label]) => (
              <li key={to}>
                <a href={href(to)} aria-current={isCurrent(to, path) ? "page" : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        {session && (
          <div class="who">
            <span>{session.kind === "api_key" ? "Signed in with an API key" : "Signed in as operator"}</span>
            <button
              type="button"
              class="secondary small"
              onClick={() => {
                signOut();
                navigate("/");
              }}
            >
              Sign out
            </button>
          </div>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        <View route={route} session={session} />
      </main>
    </>
  );
}
