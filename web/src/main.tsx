import { createRoot } from "react-dom/client";
import { installFetchGuard } from "./auth";
import { AuthRoot } from "./components/AuthRoot";
import "./styles.css";
import "./auth.css";
import "./responsive.css";

installFetchGuard();
createRoot(document.getElementById("root") as HTMLElement).render(<AuthRoot />);
