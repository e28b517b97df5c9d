// The message id the location hash asks to show (`#/c/<id>?m=<message>`), following hash changes.
import { useEffect, useState } from "react";
import { parseFocus } from "./route";

export function useFocusedMessage(): string | null {
  const [focus, setFocus] = useState(() => parseFocus(window.location.hash));
  useEffect(() => {
    const onHash = () => setFocus(parseFocus(window.location.hash));
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  return focus;
}
