"""UI helpers shared by the pages (kept in a subfolder so Streamlit never mistakes them for pages)."""
