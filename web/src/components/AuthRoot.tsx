// The root: asks the server who is signed in, then shows the sign-in page or the app. With auth
// off (the server says `auth: false`) the app shows at once and there is no sign-in UI. The app
// is keyed by the user, so a different user never sees the previous one's state.
import { useEffect } from "react";
import { App } from "../App";
import { loadSession, useAuth } from "../auth";
import { setStatuses } from "../statusStore";
import { SignInPage } from "./SignInPage";

export function AuthRoot() {
  const auth = useAuth();
  useEffect(() => {
    void loadSession();
  }, []);
  const signedOut = auth.kind === "signed-out";
  useEffect(() => {
    if (signedOut) setStatuses({}, false, 0); // forget the previous user's badges
  }, [signedOut]);

  switch (auth.kind) {
    case "loading":
      return <main className="sign-in" aria-busy="true" data-testid="auth-loading" />;
    case "error":
      return (
        <main className="sign-in">
          <div className="sign-in-card">
            <div className="notice error" role="alert" data-testid="auth-error">
              Cannot reach the server: {auth.message}
            </div>
            <button type="button" onClick={() => void loadSession()}>
              Try again
            </button>
          </div>
        </main>
      );
    case "signed-out":
      return <SignInPage reason={auth.reason} />;
    default:
      return <App key={auth.user.id} />;
  }
}
