// Runs Lucene's own RegExp (the engine behind Elasticsearch/OpenSearch `regexp` queries) over strings.
// stdin: the number of patterns, the patterns, then the strings; each line base64 (UTF-8).
// stdout: per pattern, "ERR <why>" or one '0'/'1' per string (whole-string match, as on a keyword term).
// Flags ALL and 10000 determinized states are the query's defaults in Elasticsearch and OpenSearch.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.apache.lucene.util.automaton.Automaton;
import org.apache.lucene.util.automaton.CharacterRunAutomaton;
import org.apache.lucene.util.automaton.RegExp;

public class LuceneRegexp {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        Base64.Decoder b64 = Base64.getDecoder();
        int n = Integer.parseInt(in.readLine().trim());
        List<String> patterns = new ArrayList<>();
        for (int i = 0; i < n; i++) patterns.add(new String(b64.decode(in.readLine()), StandardCharsets.UTF_8));
        List<String> strings = new ArrayList<>();
        for (String line; (line = in.readLine()) != null; ) strings.add(new String(b64.decode(line), StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String p : patterns) {
            CharacterRunAutomaton run;
            try {
                Automaton a = new RegExp(p, RegExp.ALL).toAutomaton(10000);
                run = new CharacterRunAutomaton(a);
            } catch (RuntimeException e) {
                out.append("ERR ").append(e.toString().replace('\n', ' ')).append('\n');
                continue;
            }
            for (String s : strings) out.append(run.run(s) ? '1' : '0');
            out.append('\n');
        }
        System.out.print(out);
    }
}
